"""The ledger-backed artifact registry: the ``artifacts`` projection rows are the registry.

Lookups read the projection (``get_row`` by id; the run's rows scanned for a path — the table
indexes ``(run_id, artifact_id)`` only, and a run holds at most a few thousand artifacts).
:meth:`LedgerRegistry.register` applies :func:`~charter.artifacts.registry.decide` and appends
``artifact_registered`` only when it answers ``None``; the projection refuses a second
registration of the same artifact id in the append's transaction.

:meth:`LedgerRegistry.check` is the same rule for callers that append the event themselves
(the kernel appends a call's registrations together with its outcome, in one transaction).
Two concurrent registrations of one *path* are not serialised here: the create-only store
already makes two files at one path impossible, and a call registers only what it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

from charter.artifacts.records import ArtifactRecord
from charter.artifacts.registry import decide
from charter.ledger.events import NewEvent
from charter.ledger.ports import Store
from charter.ledger.projections import Row, artifact_key


def record_of(row: Row) -> ArtifactRecord:
    """The record an ``artifacts`` projection row stands for."""
    return ArtifactRecord.from_event_payload(row["run_id"], row)


def registration_event(record: ArtifactRecord) -> NewEvent:
    return NewEvent(type="artifact_registered", payload=record.to_event_payload())


class LedgerRegistry:
    """Registrations as ``artifact_registered`` events and their projection rows."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def check(self, record: ArtifactRecord) -> ArtifactRecord | None:
        """The existing record to use instead, ``None`` to append ``record``, or a failure."""
        return decide(
            record,
            same_path=await self.by_path(record.run_id, record.path),
            same_id=await self.get(record.run_id, record.artifact_id),
        )

    async def register(self, record: ArtifactRecord) -> ArtifactRecord:
        existing = await self.check(record)
        if existing is not None:
            return existing
        await self.store.append(record.run_id, [registration_event(record)])
        return record

    async def get(self, run_id: str, artifact_id: str) -> ArtifactRecord | None:
        row = await self.store.get_row(artifact_key(run_id, artifact_id))
        return record_of(row) if row is not None else None

    async def by_path(self, run_id: str, path: str) -> ArtifactRecord | None:
        for row in await self.store.list_rows("artifacts", run_id):
            if row["path"] == path:
                return record_of(row)
        return None

    async def list(self, run_id: str) -> Sequence[ArtifactRecord]:
        return tuple(record_of(row) for row in await self.store.list_rows("artifacts", run_id))
