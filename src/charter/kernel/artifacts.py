"""Artifacts in the call path: declared inputs, the tool's writer, registration, rollback.

A contract's ``artifacts`` field (:class:`~charter.contracts.model.ArtifactSpec`) drives it:

* **inputs** — before the reservation, every argument named in ``artifacts.inputs`` must hold
  the id (or a list of ids) of a registered artifact of the context's run whose file still
  matches its checksum: ``ARTIFACT_INPUT_INVALID`` (not an id), ``ARTIFACT_INPUT_NOT_FOUND``
  (not registered in this run), ``ARTIFACT_INPUT_INTEGRITY`` (the file changed);
* **writes** — the Python executor's ``ctx.artifacts`` is a :class:`RunFiles`: create-only
  writes confined to the run, media types checked against ``artifacts.media_types``
  (``ARTIFACT_MEDIA_TYPE_UNDECLARED``);
* after the call, :class:`RunFiles` is sealed (a writer still open — a timed-out sync tool's
  thread — can no longer publish); a succeeded call's files become ``artifact_registered``
  events appended in the same transaction as its outcome (producer = task/tool/call, trust
  ``internal``); a failed or unknown call's files are removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio.to_thread

from charter.artifacts import failures
from charter.artifacts.names import check_name_secret
from charter.artifacts.ports import ArtifactWriter
from charter.artifacts.records import MEDIA_TYPE, ArtifactRecord, Producer, StoredObject, Trust
from charter.artifacts.registry import decide
from charter.artifacts.service import ArtifactService
from charter.contracts.model import ToolContract
from charter.errors import ContractViolation, Failure, InvalidInput
from charter.ledger.ids import check_identifier


def input_ids(contract: ToolContract, arguments: Mapping[str, Any]) -> list[str]:
    """The artifact ids the declared input arguments name (absent arguments name none)."""
    ids: list[str] = []
    for name in contract.artifact_inputs:
        value = arguments.get(name)
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            try:
                ids.append(check_identifier(item, what="artifact id"))
            except Failure:
                raise InvalidInput(
                    f"argument {name!r} must hold an artifact id or a list of them",
                    reason="ARTIFACT_INPUT_INVALID",
                    details={"argument": name},
                ) from None
    return ids


async def check_inputs(
    service: ArtifactService | None,
    run_id: str,
    contract: ToolContract,
    arguments: Mapping[str, Any],
    *,
    verify: bool = True,
) -> dict[str, ArtifactRecord]:
    """The declared input artifacts, each registered in ``run_id`` (and checksum-verified)."""
    ids = input_ids(contract, arguments)
    if not ids:
        return {}
    if service is None:
        raise InvalidInput(
            "this runtime has no artifact store", reason="ARTIFACT_INPUT_NOT_FOUND", run_id=run_id
        )
    found: dict[str, ArtifactRecord] = {}
    for artifact_id in ids:
        record = await service.registry.get(run_id, artifact_id)
        if record is None:
            raise InvalidInput(
                "the input is not a registered artifact of this run",
                reason="ARTIFACT_INPUT_NOT_FOUND",
                details={"artifact_id": artifact_id},
                run_id=run_id,
            )
        try:
            if verify:
                await service.verify(run_id, artifact_id)
        except Failure as exc:
            raise ContractViolation(
                "the input artifact no longer matches its registered checksum",
                reason="ARTIFACT_INPUT_INTEGRITY",
                details={"artifact_id": artifact_id, "store_reason": exc.reason},
                run_id=run_id,
            ) from None
        found[artifact_id] = record
    return found


@dataclass(frozen=True, slots=True)
class Written:
    stored: StoredObject
    media_type: str
    type: str


class _SealedWriter:
    """A store writer that publishes only while its :class:`RunFiles` is not sealed."""

    def __init__(self, files: RunFiles, inner: ArtifactWriter, media_type: str, type_: str):
        self._files = files
        self._inner = inner
        self._media_type = media_type
        self._type = type_

    def write(self, data: bytes | bytearray | memoryview, /) -> int:
        return self._inner.write(data)

    def close(self) -> StoredObject:
        with self._files.lock:
            if self._files.sealed:
                self._inner.abort()
                raise InvalidInput(
                    "the call is over; its artifact writer is closed", reason="ARTIFACT_CALL_OVER"
                )
            stored = self._inner.close()
            self._files.written.append(Written(stored, self._media_type, self._type))
            return stored

    def abort(self) -> None:
        self._inner.abort()

    @property
    def result(self) -> StoredObject:
        return self._inner.result

    def __enter__(self) -> _SealedWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class RunFiles:
    """``ctx.artifacts``: one call's create-only writes into its run, and its declared inputs."""

    def __init__(
        self,
        service: ArtifactService,
        run_id: str,
        contract: ToolContract,
        inputs: Mapping[str, ArtifactRecord],
        contains_secret: Callable[[str], bool] | None = None,
    ) -> None:
        self._service = service
        self._contains_secret = contains_secret  # this call's secrets (its arguments)
        self.run_id = run_id
        spec = contract.artifacts
        self._writes = spec is not None and spec.writes
        self._media_types = frozenset(spec.media_types) if spec is not None else frozenset()
        self._inputs = dict(inputs)
        self.lock = threading.Lock()
        self.sealed = False
        self.written: list[Written] = []
        self._open: list[_SealedWriter] = []

    def open(
        self,
        path: str,
        *,
        media_type: str = "application/octet-stream",
        type: str = "file",
        versioned: bool = False,
    ) -> _SealedWriter:
        if not self._writes:
            raise InvalidInput(
                "the tool's contract does not declare artifacts.writes",
                reason="ARTIFACT_WRITES_UNDECLARED",
            )
        if not isinstance(media_type, str) or MEDIA_TYPE.fullmatch(media_type) is None:
            raise InvalidInput(
                "media_type must be type/subtype in lower case", reason="ARTIFACT_RECORD_INVALID"
            )
        if self._media_types and media_type.split(";")[0].strip() not in self._media_types:
            raise InvalidInput(
                "the tool's contract does not declare this media type",
                reason="ARTIFACT_MEDIA_TYPE_UNDECLARED",
                details={"media_type": media_type},
            )
        check_identifier(type, what="artifact type")
        self._service.check_name(path)
        check_name_secret(path, self._contains_secret)
        with self.lock:
            if self.sealed:
                raise InvalidInput(
                    "the call is over; its artifact writer is closed", reason="ARTIFACT_CALL_OVER"
                )
            inner = self._service.store.open_write(self.run_id, path, versioned=versioned)
            writer = _SealedWriter(self, inner, media_type, type)
            self._open.append(writer)
            return writer

    def put(
        self,
        path: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        type: str = "file",
        versioned: bool = False,
    ) -> StoredObject:
        with self.open(path, media_type=media_type, type=type, versioned=versioned) as writer:
            writer.write(data)
        return writer.result

    def read(self, artifact_id: str) -> bytes:
        """A declared input's content, verified against its registered checksum."""
        record = self._inputs.get(artifact_id)
        if record is None:
            raise InvalidInput(
                "not a declared input artifact of this call",
                reason="ARTIFACT_INPUT_NOT_FOUND",
                details={"artifact_id": artifact_id},
            )
        return self._service.store.read_bytes(
            self.run_id, record.path, expected_sha256=record.sha256
        )

    def seal(self) -> tuple[Written, ...]:
        """No more writes; writers still open are aborted. Returns what was published."""
        with self.lock:
            self.sealed = True
            pending = list(self._open)
        for writer in pending:
            try:
                writer.abort()
            except Failure:
                continue
        return tuple(self.written)


async def seal(files: RunFiles) -> tuple[Written, ...]:
    return await anyio.to_thread.run_sync(files.seal)


async def records_for(
    service: ArtifactService,
    run_id: str,
    written: Sequence[Written],
    producer: Producer,
) -> tuple[list[ArtifactRecord], list[str]]:
    """What a succeeded call wrote: the registrations to append with its outcome, and the ids.

    A path already registered with the same content keeps its registration (nothing to
    append); with other content the call fails (``ARTIFACT_IMMUTABLE``).
    """
    new: list[ArtifactRecord] = []
    ids: list[str] = []
    for item in written:
        info = await anyio.to_thread.run_sync(service.store.stat, run_id, item.stored.path)
        if info is None:
            raise failures.not_found(item.stored.path, run_id=run_id)
        if info.size != item.stored.size:
            raise failures.integrity(item.stored.path, run_id=run_id)
        record = service.new_record(
            run_id,
            item.stored,
            type=item.type,
            media_type=item.media_type,
            producer=producer,
            trust=Trust.INTERNAL,
        )
        existing = decide(
            record,
            same_path=await service.registry.by_path(run_id, record.path),
            same_id=await service.registry.get(run_id, record.artifact_id),
        )
        if existing is None:
            new.append(record)
        ids.append((existing or record).artifact_id)
    return new, ids
