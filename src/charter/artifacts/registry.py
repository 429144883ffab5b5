"""The in-memory artifact registry, and the one rule every registry applies.

:func:`decide` is the registration rule without I/O, shared by this registry and the
ledger-backed one (which looks the two existing records up in the artifact projection, calls
``decide`` and appends ``artifact_registered`` only when it returns ``None``):

* a path registered with the same content fields → the existing record (nothing is appended);
* a path registered with different content → ``ARTIFACT_IMMUTABLE``;
* an artifact id already used for another registration → ``ARTIFACT_ID_CONFLICT``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from charter.artifacts import failures
from charter.artifacts.records import ArtifactRecord
from charter.errors import InvalidInput


def decide(
    record: ArtifactRecord,
    *,
    same_path: ArtifactRecord | None,
    same_id: ArtifactRecord | None,
) -> ArtifactRecord | None:
    """The existing record to return, ``None`` to register ``record``, or a failure raised."""
    if same_path is not None:
        if same_path.same_content(record):
            return same_path
        raise failures.immutable(record.path, run_id=record.run_id)
    if same_id is not None:
        raise InvalidInput(
            "the artifact id is already registered for another path",
            reason="ARTIFACT_ID_CONFLICT",
            run_id=record.run_id,
            details={"artifact_id": record.artifact_id},
        )
    return None


class MemoryRegistry:
    """Registrations kept in memory, with the same rules as the ledger-backed registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[tuple[str, str], ArtifactRecord] = {}
        self._by_path: dict[tuple[str, str], ArtifactRecord] = {}
        self._order: dict[str, list[ArtifactRecord]] = {}

    async def register(self, record: ArtifactRecord) -> ArtifactRecord:
        with self._lock:
            existing = decide(
                record,
                same_path=self._by_path.get((record.run_id, record.path)),
                same_id=self._by_id.get((record.run_id, record.artifact_id)),
            )
            if existing is not None:
                return existing
            self._by_id[(record.run_id, record.artifact_id)] = record
            self._by_path[(record.run_id, record.path)] = record
            self._order.setdefault(record.run_id, []).append(record)
            return record

    async def get(self, run_id: str, artifact_id: str) -> ArtifactRecord | None:
        return self._by_id.get((run_id, artifact_id))

    async def by_path(self, run_id: str, path: str) -> ArtifactRecord | None:
        return self._by_path.get((run_id, path))

    async def list(self, run_id: str) -> Sequence[ArtifactRecord]:
        return tuple(self._order.get(run_id, ()))
