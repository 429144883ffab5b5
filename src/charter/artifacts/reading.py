"""A reader that verifies size and checksum when it reaches the end, for every store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from types import TracebackType

from charter.artifacts import failures
from charter.artifacts.records import StoredObject
from charter.errors import InvalidInput

CHUNK = 1 << 20


class VerifyingReader:
    """Reads through ``raw_read`` and hashes; the read that reaches the end verifies.

    ``size`` is the size the store reported before reading (checked against ``expected_size``
    at once, so a truncated or grown file fails before any byte is returned).
    """

    def __init__(
        self,
        raw_read: Callable[[int], bytes],
        release: Callable[[], None],
        *,
        size: int,
        path: str,
        run_id: str,
        expected_sha256: str | None,
        expected_size: int | None,
    ) -> None:
        self._raw_read = raw_read
        self._release: Callable[[], None] | None = release
        self._size = size
        self._path = path
        self._run_id = run_id
        self._expected_sha256 = expected_sha256
        self._expected_size = expected_size
        self._hash = hashlib.sha256()
        self._seen = 0
        self._finished = False
        if expected_size is not None and size != expected_size:
            self.close()
            raise failures.integrity(path, run_id=run_id)

    def __enter__(self) -> VerifyingReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def read(self, size: int = -1, /) -> bytes:
        if self._release is None:
            raise InvalidInput("the artifact reader is closed", reason="ARTIFACT_READER_CLOSED")
        if self._finished or size == 0:
            return b""
        if size > 0:
            data = self._raw_read(size)
            if data:
                self._update(data)
            else:
                self._finish()
            return data
        # Read everything: ask for the announced remainder (one call for a regular file), then
        # confirm the end.
        chunks: list[bytes] = []
        want = max(self._size - self._seen, 0) + 1
        while data := self._raw_read(want):
            self._update(data)
            chunks.append(data)
            want = CHUNK
        self._finish()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self.read(CHUNK):
            yield chunk

    def _update(self, data: bytes) -> None:
        self._hash.update(data)
        self._seen += len(data)

    def _finish(self) -> None:
        self._finished = True
        digest = "sha256:" + self._hash.hexdigest()
        if (self._expected_sha256 is not None and digest != self._expected_sha256) or (
            self._expected_size is not None and self._seen != self._expected_size
        ):
            raise failures.integrity(self._path, run_id=self._run_id)

    def stored(self) -> StoredObject:
        """Path, checksum and size of what was read (once the end was reached)."""
        if not self._finished:
            raise InvalidInput("the artifact was not read to the end", reason="ARTIFACT_READ_SHORT")
        digest = "sha256:" + self._hash.hexdigest()
        return StoredObject(path=self._path, sha256=digest, size=self._seen)
