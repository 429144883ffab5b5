"""Artifacts for the async core: a store and a registry behind one small service.

The kernel (wired later) uses it so: a call's writes go through a :class:`CallOutputs`, which
records every file the call published; on success each is registered (:meth:`register`), on
failure :meth:`rollback` removes the unregistered ones whose checksum still matches. Subprocess
executors write into a staging area accepted or discarded by the parent
(:meth:`accept_staging`). Reads of registered artifacts are always checksum-verified.

Store methods block; they run through ``anyio.to_thread.run_sync`` here.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import anyio.to_thread

from charter.artifacts import failures
from charter.artifacts.names import check_name_secret, normal_path
from charter.artifacts.ports import ArtifactRegistry, ArtifactStore, ArtifactWriter
from charter.artifacts.records import (
    ArtifactRecord,
    Producer,
    StagingArea,
    StagingLimits,
    StoredObject,
    Trust,
)
from charter.errors import Failure
from charter.ledger.clock import system_clock
from charter.ledger.events import format_at
from charter.ledger.ids import new_id


def _artifact_id() -> str:
    return new_id("artifact", hex_source=secrets.token_hex)


class CallOutputs:
    """The files one call wrote: a store handle that remembers what it published."""

    def __init__(self, store: ArtifactStore, run_id: str) -> None:
        self._store = store
        self.run_id = run_id
        self._writers: list[ArtifactWriter] = []
        self._extra: list[StoredObject] = []

    def open_write(self, path: str, *, versioned: bool = False) -> ArtifactWriter:
        writer = self._store.open_write(self.run_id, path, versioned=versioned)
        self._writers.append(writer)
        return writer

    def put(self, path: str, data: bytes, *, versioned: bool = False) -> StoredObject:
        with self.open_write(path, versioned=versioned) as writer:
            writer.write(data)
        return writer.result

    def adopt(self, objects: Sequence[StoredObject]) -> None:
        """Count files published another way (an accepted staging area) as this call's."""
        self._extra.extend(objects)

    @property
    def written(self) -> tuple[StoredObject, ...]:
        published: list[StoredObject] = []
        for writer in self._writers:
            try:
                published.append(writer.result)
            except Failure:
                continue  # never published: it removed its own temporary file
        return (*published, *self._extra)


class ArtifactService:
    """Registration, verified reads, rollback and staging over one store and one registry."""

    def __init__(
        self,
        *,
        store: ArtifactStore,
        registry: ArtifactRegistry,
        clock: Callable[[], datetime] = system_clock,
        new_artifact_id: Callable[[], str] = _artifact_id,
    ) -> None:
        self.store = store
        self.registry = registry
        self._clock = clock
        self._new_id = new_artifact_id
        # the runtime sets the deployment redactor's test: names holding a secret are refused
        self.contains_secret: Callable[[str], bool] | None = None

    def check_name(self, path: str) -> None:
        """``ARTIFACT_NAME_SECRET`` if ``path`` holds a known secret; call before writing."""
        check_name_secret(path, self.contains_secret)

    def outputs(self, run_id: str) -> CallOutputs:
        return CallOutputs(self.store, run_id)

    async def register(
        self,
        run_id: str,
        stored: StoredObject,
        *,
        type: str,
        media_type: str,
        producer: Producer,
        trust: Trust,
        artifact_id: str | None = None,
    ) -> ArtifactRecord:
        """Register a file this store published (its checksum came from the writer).

        The file must still be there with the same size; re-registering the same path returns
        the first registration when every content field is identical.
        """
        info = await anyio.to_thread.run_sync(self.store.stat, run_id, stored.path)
        if info is None:
            raise failures.not_found(stored.path, run_id=run_id)
        if info.size != stored.size:
            raise failures.integrity(stored.path, run_id=run_id)
        record = self.new_record(
            run_id,
            stored,
            type=type,
            media_type=media_type,
            producer=producer,
            trust=trust,
            artifact_id=artifact_id,
        )
        return await self.registry.register(record)

    def new_record(
        self,
        run_id: str,
        stored: StoredObject,
        *,
        type: str,
        media_type: str,
        producer: Producer,
        trust: Trust,
        artifact_id: str | None = None,
    ) -> ArtifactRecord:
        """The registration record of ``stored`` (a fresh id, created now); nothing is written."""
        self.check_name(stored.path)
        return ArtifactRecord(
            artifact_id=artifact_id or self._new_id(),
            run_id=run_id,
            type=type,
            media_type=media_type,
            path=stored.path,
            sha256=stored.sha256,
            size=stored.size,
            producer=producer,
            trust=trust,
            created_at=format_at(self._clock()),
        )

    async def _record(self, run_id: str, artifact_id: str) -> ArtifactRecord:
        record = await self.registry.get(run_id, artifact_id)
        if record is None:
            raise failures.not_found(None, run_id=run_id)
        return record

    async def read_bytes(self, run_id: str, artifact_id: str) -> bytes:
        """The registered artifact's content, checksum-verified."""
        record = await self._record(run_id, artifact_id)
        read = functools.partial(
            self.store.read_bytes, run_id, record.path, expected_sha256=record.sha256
        )
        return await anyio.to_thread.run_sync(read)

    async def verify(self, run_id: str, artifact_id: str) -> ArtifactRecord:
        """Re-hash the registered file (``ARTIFACT_INTEGRITY_MISMATCH`` if it changed)."""
        record = await self._record(run_id, artifact_id)
        found = await anyio.to_thread.run_sync(self.store.checksum, run_id, record.path)
        if (found.sha256, found.size) != (record.sha256, record.size):
            raise failures.integrity(record.path, run_id=run_id)
        return record

    async def write_bytes(
        self, run_id: str, path: str, data: bytes, *, versioned: bool = False
    ) -> StoredObject:
        """Create-only write; a registered path answers ``ARTIFACT_IMMUTABLE``."""
        try:
            put = functools.partial(self.store.put, run_id, path, data, versioned=versioned)
            return await anyio.to_thread.run_sync(put)
        except Failure as exc:
            if exc.reason == "ARTIFACT_EXISTS":
                await self.ensure_unregistered(run_id, exc.details.get("path", path))
            raise

    async def ensure_unregistered(self, run_id: str, path: str) -> None:
        """Raise ``ARTIFACT_IMMUTABLE`` when the run-relative ``path`` is registered."""
        path = normal_path(path)
        if await self.registry.by_path(run_id, path) is not None:
            raise failures.immutable(path, run_id=run_id)

    async def rollback(self, run_id: str, written: Sequence[StoredObject]) -> tuple[str, ...]:
        """Remove what a failed call wrote: unregistered files whose checksum still matches."""
        loose = [obj for obj in written if await self.registry.by_path(run_id, obj.path) is None]
        if not loose:
            return ()
        return await anyio.to_thread.run_sync(self.store.discard, run_id, loose)

    async def open_staging(self, run_id: str, call_id: str, attempt: int) -> StagingArea:
        return await anyio.to_thread.run_sync(self.store.open_staging, run_id, call_id, attempt)

    async def accept_staging(
        self,
        area: StagingArea,
        *,
        attempt: int,
        expected: Mapping[str, str] | None = None,
        limits: StagingLimits | None = None,
    ) -> tuple[StoredObject, ...]:
        accept = functools.partial(
            self.store.accept_staging, area, attempt=attempt, expected=expected, limits=limits
        )
        return await anyio.to_thread.run_sync(accept)

    async def discard_staging(self, area: StagingArea) -> None:
        await anyio.to_thread.run_sync(self.store.discard_staging, area)
