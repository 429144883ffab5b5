"""The artifact ports: what a store must do, and the registry that makes artifacts immutable.

:class:`ArtifactStore` is implemented by :mod:`charter.artifacts.local` and
:mod:`charter.artifacts.s3` and held to the same behaviour by
:mod:`charter.testing.artifact_conformance`. Its methods block (file and network I/O): async callers
run them through the one thread helper (``anyio.to_thread.run_sync``), as
:class:`~charter.artifacts.service.ArtifactService` does. Every method takes a run id (an
identifier) and a run-relative path (:func:`~charter.artifacts.names.check_path`), or for
stores that have one, an ``s3://`` reference into the store's own bucket and run.

:class:`ArtifactRegistry` answers "is this path registered, and as what?". The ledger-backed
artifact projection implements it; :class:`~charter.artifacts.registry.MemoryRegistry` is the
in-memory one for tests. Stores never consult it: create-only writes already make every
published file impossible to overwrite; the registry decides what rollback may remove and turns
``ARTIFACT_EXISTS`` into ``ARTIFACT_IMMUTABLE`` for registered paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Protocol

from charter.artifacts.records import (
    ArtifactRecord,
    ObjectInfo,
    StagingArea,
    StagingLimits,
    StoredObject,
)


class ArtifactWriter(Protocol):
    """A create-only write in progress: invisible until it closes without an exception.

    ``with store.open_write(run, path) as w: w.write(...)``; leaving the block normally
    publishes the file (``w.result`` then holds its path, checksum and size); an exception, or
    ``abort()``, removes everything the writer wrote.
    """

    def write(self, data: bytes | bytearray | memoryview, /) -> int: ...

    def close(self) -> StoredObject:
        """Publish the file (without overwriting anything) and return what was stored."""
        ...

    def abort(self) -> None: ...

    @property
    def result(self) -> StoredObject: ...

    def __enter__(self) -> ArtifactWriter: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class ArtifactReader(Protocol):
    """A read that verifies: reaching the end checks size and checksum against the expected.

    ``ARTIFACT_INTEGRITY_MISMATCH`` is raised by the read that reaches the end of the content.
    """

    def read(self, size: int = -1, /) -> bytes: ...

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...

    def __enter__(self) -> ArtifactReader: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class ArtifactStore(Protocol):
    """Files confined to their run: create-only, published on close, read with verification."""

    def open_write(self, run_id: str, path: str, *, versioned: bool = False) -> ArtifactWriter:
        """Start a create-only write of ``path``.

        With ``versioned`` the file is published under the first free name of
        :func:`~charter.artifacts.names.versions` at the moment of publication (atomically:
        no check-then-write race); otherwise an existing ``path`` fails with
        ``ARTIFACT_EXISTS`` when the writer closes.
        """
        ...

    def put(self, run_id: str, path: str, data: bytes, *, versioned: bool = False) -> StoredObject:
        """Write ``data`` in one call (``open_write`` + ``write`` + ``close``)."""
        ...

    def open_read(
        self,
        run_id: str,
        path: str,
        *,
        expected_sha256: str | None = None,
        expected_size: int | None = None,
    ) -> ArtifactReader: ...

    def read_bytes(
        self, run_id: str, path: str, *, expected_sha256: str | None = None
    ) -> bytes: ...

    def checksum(self, run_id: str, path: str) -> StoredObject:
        """Read the whole file and return its checksum and size (nothing is returned to read)."""
        ...

    def stat(self, run_id: str, path: str) -> ObjectInfo | None:
        """The file's size, or None when nothing is there."""
        ...

    def list(self, run_id: str, prefix: str = "") -> Sequence[ObjectInfo]:
        """The run's files in path order (never the staging area or the run's own files)."""
        ...

    def first_free_path(self, run_id: str, path: str) -> str:
        """``path`` if nothing is there, else its first free ``-vN`` version (advisory)."""
        ...

    def discard(self, run_id: str, objects: Sequence[StoredObject]) -> tuple[str, ...]:
        """Remove the files a failed call wrote, each only if its checksum still matches.

        Returns the paths removed. Missing files and files whose content changed are left
        alone. Callers remove only unregistered files (see ``ArtifactService.rollback``).
        """
        ...

    def open_staging(self, run_id: str, call_id: str, attempt: int) -> StagingArea:
        """Create the per-call staging area a subprocess executor writes into."""
        ...

    def stage(self, area: StagingArea, path: str) -> ArtifactWriter:
        """A writer into a staging area (what a worker with store access would use)."""
        ...

    def accept_staging(
        self,
        area: StagingArea,
        *,
        attempt: int,
        expected: Mapping[str, str] | None = None,
        limits: StagingLimits | None = None,
    ) -> tuple[StoredObject, ...]:
        """Publish every staged file, or none.

        Refused (and the area discarded) when ``attempt`` is not the area's attempt
        (``ARTIFACT_ATTEMPT_STALE``), a staged path is invalid, a file is a symlink, hard link
        or not regular, a limit or the quota is exceeded, the staged paths differ from
        ``expected`` (``ARTIFACT_STAGING_UNDECLARED`` / ``ARTIFACT_NOT_FOUND``) or a checksum
        differs (``ARTIFACT_INTEGRITY_MISMATCH``), or a target path exists. The worker must
        have exited: the parent does not defend against a live writer holding a descriptor.
        """
        ...

    def discard_staging(self, area: StagingArea) -> None: ...


class ArtifactRegistry(Protocol):
    """Registered artifacts by run: the authority on what is immutable."""

    async def register(self, record: ArtifactRecord) -> ArtifactRecord:
        """Register ``record``, or return the existing registration of the same content.

        Registering a path again is allowed only with identical content fields
        (:meth:`ArtifactRecord.same_content`): the existing record is returned. Otherwise
        ``ARTIFACT_IMMUTABLE``; an artifact id reused for another path is
        ``ARTIFACT_ID_CONFLICT``.
        """
        ...

    async def get(self, run_id: str, artifact_id: str) -> ArtifactRecord | None: ...

    async def by_path(self, run_id: str, path: str) -> ArtifactRecord | None: ...

    async def list(self, run_id: str) -> Sequence[ArtifactRecord]:
        """In registration order."""
        ...
