"""The in-memory store: for unit tests, with exactly the invariants of the SQL backends.

Rows are kept as canonical JSON bytes, so what a caller reads back is a copy, as from a
database; a second event with the same ``(run_id, seq)`` raises the same
:class:`~charter.errors.StoreConflict` a primary key raises in SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from charter.contracts.canonical import canonical_bytes_noting
from charter.errors import StoreConflict
from charter.ledger.append import check_in_flight, guarded, plan_append, rows_needed
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import Event, NewEvent, StoredEvent, format_at
from charter.ledger.lifecycle import NOTHING_IN_FLIGHT, InFlightCalls
from charter.ledger.ports import RunSnapshot, RunSummary, StoredSnapshot
from charter.ledger.projections import RUN_TABLES, TABLES, Row, RowKey, run_key
from charter.ledger.rows import parse_own
from charter.ledger.trust import LedgerTrust, RunProblem
from charter.ledger.views import TypedReads
from charter.stores.builds import MemoryBuilds
from charter.stores.conversations import MemoryConversations
from charter.stores.leases import MemoryLeases
from charter.stores.locks import LocalRunLocks


class MemoryStore(TypedReads, MemoryConversations, MemoryLeases, MemoryBuilds):
    def __init__(
        self,
        *,
        key: LedgerKey,
        clock: Clock = system_clock,
        in_flight: InFlightCalls = NOTHING_IN_FLIGHT,
    ) -> None:
        self.key = key
        self._clock = clock
        self._in_flight = in_flight
        self.events: dict[tuple[str, int], StoredEvent] = {}
        self.seqs: dict[str, list[int]] = {}
        self.heads: dict[str, Head] = {}
        self._run_locks = LocalRunLocks()
        self.rows: dict[RowKey, bytes] = {}
        self._tick: asyncio.Event | None = None  # made by the first waiter
        self.trust = LedgerTrust(key)
        """Runs refused in this process (quarantined): the memory store cannot be tampered
        with from outside, so it checks heads but has no row MACs to check."""

    # -- EventLog -----------------------------------------------------------------------

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        if guarded(entries):
            await check_in_flight(self._in_flight, run_id, entries)
        # No await from here to the end: the append is atomic on the event loop.
        head = self.heads.get(run_id)
        self.trust.refuse_if_invalid(run_id)
        needed = {k: self._row(k) for k in rows_needed(run_id, entries)}
        proven: dict[int, Any] = {}  # the payloads' nested values, for the rows built of them
        plan = plan_append(
            run_id=run_id,
            head=head,
            entries=entries,
            rows=needed,
            now=format_at(self._clock()),
            key=self.key,
            expected_seq=expected_seq,
            proven=proven,
        )
        rows = plan.rows  # built on each access
        for row in rows:
            if (run_id, row.seq) in self.events:
                raise StoreConflict(
                    "duplicate (run_id, seq)", reason="LEDGER_DUPLICATE_KEY", run_id=run_id
                )
        for row in rows:
            self.events[(run_id, row.seq)] = row
            self.seqs.setdefault(run_id, []).append(row.seq)
        for key, value in plan.writes.items():
            self.rows[key] = canonical_bytes_noting(value, proven)
        self.heads[run_id] = plan.head
        self.trust.advance(plan.head)
        tick = self._tick
        if tick is not None:  # someone waits for appends: wake them (a new waiter makes anew)
            self._tick = None
            tick.set()
        return plan.events

    # The kernel may start this append in the caller's task (charter.kernel.flight.in_place):
    # nothing in it is bound to the current task.
    append_in_place = append

    async def schema_versions(self) -> tuple[int, int]:
        return 1, 1  # no schema: always current

    async def head(self, run_id: str) -> Head | None:
        return self.heads.get(run_id)

    async def read_stored(
        self, run_id: str, *, after: int = 0, limit: int = 1000
    ) -> Sequence[StoredEvent]:
        seqs = sorted(s for s in self.seqs.get(run_id, ()) if s > after)[:limit]
        return [self.events[(run_id, s)] for s in seqs if (run_id, s) in self.events]

    async def wait_for_events(self, run_id: str, *, after: int, timeout: float) -> bool:
        tick = self._tick
        if tick is None:
            tick = self._tick = asyncio.Event()
        head = self.heads.get(run_id)
        if head is not None and head.seq > after:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tick.wait(), timeout)
        head = self.heads.get(run_id)
        return head is not None and head.seq > after

    # -- ProjectionReader ---------------------------------------------------------------

    def _row(self, key: RowKey) -> Row | None:
        data = self.rows.get(key)
        if data is None:
            return None
        return parse_own(data)  # a fresh dict: the stored bytes are this store's canonical JSON

    async def get_row(self, key: RowKey) -> Row | None:
        self.trust.refuse_if_invalid(key.key[0])
        return self._row(key)

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]:
        spec = TABLES[table]
        rows = [json.loads(d) for k, d in self.rows.items() if _of_run(k, table, run_id)]
        return sorted(rows, key=spec.sort_key)

    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        spec = TABLES[table]
        allowed = (*spec.keys, *spec.columns)
        for column in where:
            if column not in allowed:
                raise ValueError(f"{table}.{column} is not a key or indexed column")
        candidates = (json.loads(d) for k, d in self.rows.items() if k.table == table)
        rows = [r for r in candidates if all(r.get(c) == v for c, v in where.items())]
        return sorted(rows, key=spec.sort_key)[:limit]

    async def list_runs(
        self, *, limit: int = 100, tenant: str | None = None
    ) -> Sequence[RunSummary]:
        runs = [json.loads(d) for k, d in self.rows.items() if k.table == "runs"]
        if tenant is not None:
            runs = [r for r in runs if r.get("tenant") == tenant]
        runs.sort(key=lambda r: (r["created_at"], r["run_id"]), reverse=True)
        return [
            RunSummary(
                run=r,
                event_count=self.heads[r["run_id"]].seq if r["run_id"] in self.heads else 0,
                problem=self.trust.problem(r["run_id"]),
            )
            for r in runs[:limit]
        ]

    async def quarantine(self, run_id: str, *, by: str, reason: str) -> RunProblem:
        """Refuse ``run_id`` from now on (for as long as this memory store lives)."""
        problem = RunProblem(
            run_id=run_id,
            reason="QUARANTINED",
            seq=None,
            message=reason,
            quarantined=True,
            marked=True,
        )
        self.trust.quarantine(problem)
        return problem

    async def run_flags(self) -> list[RunProblem]:
        return list(self.trust.invalid.values())

    async def snapshot(self, run_id: str) -> RunSnapshot | None:
        head = self.heads.get(run_id)
        if head is None:
            return None
        return RunSnapshot(
            head=head,
            run=self._row(run_key(run_id)),
            tables={t: list(await self.list_rows(t, run_id)) for t in RUN_TABLES},
        )

    async def stored_snapshot(self, run_id: str) -> StoredSnapshot | None:
        head = self.heads.get(run_id)
        if head is None:
            return None
        tables: dict[str, list[bytes]] = {}
        for table in RUN_TABLES:
            rows = [(json.loads(d), d) for k, d in self.rows.items() if _of_run(k, table, run_id)]
            rows.sort(key=lambda r: TABLES[table].sort_key(r[0]))  # list_rows' order
            tables[table] = [d for _, d in rows]
        return StoredSnapshot(head=head, run=self.rows.get(run_key(run_id)), tables=tables)

    def run_lock(self, run_id: str) -> AbstractAsyncContextManager[None]:
        """Serializes write tools of one run (in this process: the memory store is local)."""
        return self._run_locks.hold(run_id)

    async def aclose(self) -> None:
        return None


def _of_run(key: RowKey, table: str, run_id: str) -> bool:
    return key.table == table and key.key[0] == run_id
