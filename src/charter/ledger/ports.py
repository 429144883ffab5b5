"""The store ports: what the ledger needs from a backend, and nothing more.

Three small interfaces, implemented by :mod:`charter.stores.memory`, ``sqlite`` and
``postgres`` and held to the same behaviour by :mod:`charter.testing.store_conformance`:

* :class:`EventLog` — append events (sealed, chained, projected in one transaction), read the
  stored rows after a sequence number, read the head, wait for appends (subscriptions);
* :class:`ProjectionReader` — the projection rows (runs, tasks, artifacts) and one consistent
  snapshot of a run (head + rows from one read transaction), parsed or as stored (the form
  verification compares);
* :class:`Store` — both, plus ``aclose``.

Every backend raises only Charter errors: duplicate keys and stale sequence numbers are
:class:`~charter.errors.StoreConflict`, driver failures :class:`~charter.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from charter.ledger.chain import Head
from charter.ledger.events import Event, NewEvent, StoredEvent
from charter.ledger.projections import Row, RowKey

if TYPE_CHECKING:  # trust verifies through these ports: types only, no import cycle
    from charter.ledger.trust import LedgerTrust, RunProblem


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSnapshot:
    """A run's head and projection rows, read in one transaction (so they agree)."""

    head: Head
    run: Row | None
    tables: dict[str, list[Row]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSnapshot:
    """:class:`RunSnapshot` with each projection row as the store holds it, unparsed.

    A row is the UTF-8 bytes of its stored text (the canonical JSON the append path wrote,
    ``canonical_text(row)``), so verification can compare rows it rebuilds as bytes and parse
    only where they differ. Tables and order are those of :class:`RunSnapshot`.
    """

    head: Head
    run: bytes | None
    tables: dict[str, list[bytes]] = field(default_factory=dict)
    columns: dict[str, list[tuple[Any, ...]]] | None = None
    """Each row's compared columns as stored (``TableSpec.compared``; the run row's under
    ``"runs"``), in the order of ``tables``; None from a store that keeps no such copies."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    run: Row
    event_count: int
    problem: RunProblem | None = None
    """Why the run is refused (found damaged, or quarantined); then ``run`` may hold only
    its ``run_id`` (a run row that failed its MAC is not served)."""


class EventLog(Protocol):
    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        """Seal and append ``entries`` to the run atomically (all or none); return them.

        ``expected_seq`` (optimistic concurrency) is the seq the first entry must receive;
        otherwise :class:`~charter.errors.StoreConflict` (``LEDGER_SEQ_CONFLICT``).
        """
        ...

    async def head(self, run_id: str) -> Head | None: ...

    async def read_stored(
        self, run_id: str, *, after: int = 0, limit: int = 1000
    ) -> Sequence[StoredEvent]:
        """Event rows with ``seq > after`` in seq order, exactly as stored (unchecked)."""
        ...

    async def wait_for_events(self, run_id: str, *, after: int, timeout: float) -> bool:
        """Return once the run's head is past ``after`` (True) or ``timeout`` passes (False)."""
        ...


class ProjectionReader(Protocol):
    async def get_row(self, key: RowKey) -> Row | None: ...

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]: ...

    async def list_runs(
        self, *, limit: int = 100, tenant: str | None = None
    ) -> Sequence[RunSummary]:
        """Most recently created runs first; with ``tenant``, only that tenant's runs."""
        ...

    async def snapshot(self, run_id: str) -> RunSnapshot | None: ...

    async def stored_snapshot(self, run_id: str) -> StoredSnapshot | None:
        """:meth:`snapshot` with the rows as stored (:class:`StoredSnapshot`), unparsed."""
        ...


class Store(EventLog, ProjectionReader, Protocol):
    trust: LedgerTrust
    """What this process verified of each run and the runs it refuses (run-time trust)."""

    async def quarantine(self, run_id: str, *, by: str, reason: str) -> RunProblem:
        """Mark the run quarantined (outside its ledger): refused by every process."""
        ...

    async def run_flags(self) -> list[RunProblem]:
        """Runs found damaged by some process, or quarantined."""
        ...

    async def schema_versions(self) -> tuple[int, int]:
        """``(recorded, known)``: the schema version the database records now, and the
        newest this code knows (equal when the schema is current)."""
        ...

    async def aclose(self) -> None: ...
