"""Runs flagged outside their ledgers: found damaged by some process, or quarantined.

The ``run_ledger_flags`` table (SQLite and PostgreSQL) keeps one row per flagged run. A
process that refuses a run records the finding there (the first finding is kept), so that
``charter runs ls``, ``/readyz`` and the console show it to every process; an operator's
``charter runs quarantine RUN`` marks it quarantined, and every process opened afterwards
refuses the run whatever its ledger says. The table is not authenticated: deleting a row
only makes a process verify the run again on first touch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from charter.ledger.checker import storage_class
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
