"""Runs flagged outside their ledgers: found damaged by some process, or quarantined.

The ``run_ledger_flags`` table (SQLite and PostgreSQL) keeps one row per flagged run. A
process that refuses a run records the finding there (the first finding is kept), so that
``charter runs ls``, ``/readyz`` and the console show it to every process; an operator's
``charter runs quarantine RUN`` marks it quarantined, and every process opened afterwards
refuses the run whatever its ledger says. The table is not authenticated: deleting a row
only makes a process verify the run again on first touch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from charter.ledger.checker import storage_class
from charter.ledger.events import created_tenant
from charter.ledger.ports import RunSummary
from charter.ledger.trust import RunProblem

FLAG_COLUMNS = ("reason", "seq", "message", "found_at", "quarantined_at", "quarantined_by")

UPSERT_FINDING = (
    "INSERT INTO run_ledger_flags (run_id, reason, seq, message, found_at) "
    "VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (run_id) DO NOTHING"
)
UPSERT_QUARANTINE = (
    "INSERT INTO run_ledger_flags "
    "(run_id, reason, seq, message, found_at, quarantined_at, quarantined_by) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (run_id) DO UPDATE SET "
    "quarantined_at = excluded.quarantined_at, quarantined_by = excluded.quarantined_by"
)
SELECT_FLAGS = "SELECT run_id, " + ", ".join(FLAG_COLUMNS) + " FROM run_ledger_flags"
ALL_FLAGS = SELECT_FLAGS + " ORDER BY found_at, run_id"


def flag_problems(rows: Iterable[Sequence[Any]]) -> list[RunProblem]:
    """The problems :data:`ALL_FLAGS`' rows record (every flagged run)."""
    return [p for got in rows if (p := flag_problem(str(got[0]), got[1:])) is not None]


def flag_problem(run_id: str, values: Sequence[Any]) -> RunProblem | None:
    """The problem a flags row (:data:`FLAG_COLUMNS` order) records, or None (no row)."""
    reason, seq, message, _found, quarantined_at, _by = values
    if reason is None:
        return None
    return RunProblem(
        run_id=run_id,
        reason=str(reason),
        seq=seq if type(seq) is int else None,  # a hand edit may leave any value
        message=str(message),
        quarantined=quarantined_at is not None,
    )


def listed_count(run_id: str, seq: object) -> tuple[int, RunProblem | None]:
    """A run listing's event count: its head's ``seq`` (read through a LEFT JOIN). A run
    without a head row (deleted outside Charter), or whose head ``seq`` a hand edit left of
    another type (SQLite keeps it), is listed as damaged with 0 events; the listing goes on."""
    if type(seq) is int:
        return seq, None
    if seq is None:
        message = "the run has no head record (deleted outside Charter)"
    else:
        message = f"its head row is damaged: its seq is stored as {storage_class(seq)}"
    return 0, RunProblem(run_id=run_id, reason="LEDGER_HEAD_MISMATCH", seq=None, message=message)


# Runs whose head is stored but whose run row is not (deleted outside Charter): a listing
# joins from ``runs``, so without this they would silently drop out of every list. The
# anti-join reads ``run_heads`` whole (~27 ms for 100k runs on SQLite here), so a listing
# runs it only when the gate says a run row may be missing: the two tables' row counts
# differ (~1 ms), or a deleted run or head row was noted (the ledger_edits triggers).
ROWLESS_GATE_SQL = (
    "SELECT (SELECT count(*) FROM run_heads) <> (SELECT count(*) FROM runs) OR EXISTS "
    "(SELECT 1 FROM ledger_edits WHERE op IN ('delete runs', 'delete run_heads'))"
)
ROWLESS_SQL = (
    "SELECT h.run_id, h.seq, e.data, "
    + ", ".join(f"f.{c}" for c in FLAG_COLUMNS)
    + " FROM run_heads h LEFT JOIN runs r ON r.run_id = h.run_id "
    "LEFT JOIN events e ON e.run_id = h.run_id AND e.seq = 1 "
    "LEFT JOIN run_ledger_flags f ON f.run_id = h.run_id "
    "WHERE r.run_id IS NULL ORDER BY h.run_id"
)


def rowless_summaries(rows: Sequence[Sequence[Any]], tenant: str | None) -> list[RunSummary]:
    """Listing entries for :data:`ROWLESS_SQL`'s rows: each run listed by its id as damaged
    (``SNAPSHOT_DIVERGENCE``, or the finding a process recorded), for the tenant its
    ``run_created`` event names as stored — the run row that would say is gone, and a run
    whose first event names no tenant is listed for no tenant."""
    found = []
    for got in rows:
        run_id, seq, data = str(got[0]), got[1], got[2]
        if tenant is not None and created_tenant(data) != tenant:
            continue
        count = seq if type(seq) is int else 0
        problem = flag_problem(run_id, got[3:]) or RunProblem(
            run_id=run_id,
            reason="SNAPSHOT_DIVERGENCE",
            seq=None,
            message="the run has events but no run row (deleted outside Charter)",
        )
        found.append(RunSummary(run={"run_id": run_id}, event_count=count, problem=problem))
    return found
