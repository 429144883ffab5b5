"""Where a PostgreSQL process is in ``ledger_edits``: the entries it read, and the ones it may
not have seen yet.

A process reads the entries after the last id it saw (:mod:`charter.stores.sqlite_edits`
says why: events edited, rows deleted, runs quarantined under a running process). On SQLite
ids are given in commit order (one writer at a time). PostgreSQL's ``BIGSERIAL`` gives ids
when a row is inserted, and transactions commit in any order: an entry can become visible
after one with a higher id was read, and "after the last id seen" would pass over it for
good — a quarantine noted in the same instant as another entry, never seen by a running
replica. So the ids skipped between the entries read are asked for again with every read of
the table, until they appear or :data:`GAP_WAIT_S` has passed (an id can stay unused for
good: a transaction that inserted an entry and rolled back).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

GAP_WAIT_S = 60.0
"""How long an id skipped between entries read is asked for again (the transaction that
took it commits by then, or never)."""
_GAP_LIMIT = 1000
"""Skipped ids kept at most (a larger jump in the sequence is not transactions in flight)."""


class EditCursor:
    """The last ``ledger_edits`` id read, and the ids skipped below it that may yet appear."""

    def __init__(self) -> None:
        self.seen = 0
        self.skipped: dict[int, float] = {}  # id -> when it was found skipped (monotonic)

    def start(self, rows: Sequence[Sequence[Any]]) -> None:
        """Begin after the entries already there (:data:`START_SQL`'s rows: the newest ids, the
        newest last): the process reads every flagged run and verifies every run it touches
        at its start, and an id below the newest that is not there yet may still commit."""
        if rows:
            self.seen = max(0, int(rows[-1][0]) - _GAP_LIMIT)
            self.advance(rows)

    def params(self) -> tuple[int, list[int]]:
        """The parameters of :data:`UNREAD`: after the last id read, or one skipped."""
        return self.seen, list(self.skipped)

    def advance(self, rows: Sequence[Sequence[Any]]) -> None:
        """Note the entries read (``rows``: id first, in id order)."""
        now = time.monotonic()
        skipped = self.skipped
        if skipped:
            for gone in [i for i, at in skipped.items() if now - at > GAP_WAIT_S]:
                del skipped[gone]
        seen = self.seen
        for got in rows:
            entry = int(got[0])
            skipped.pop(entry, None)
            if entry > seen:
                if entry - seen - 1 <= _GAP_LIMIT and len(skipped) < _GAP_LIMIT:
                    for gap in range(seen + 1, entry):
                        skipped[gap] = now
                seen = entry
        self.seen = seen


START_SQL = (
    "SELECT id FROM ledger_edits WHERE id > "
    "(SELECT coalesce(max(id), 0) FROM ledger_edits) - %s ORDER BY id"
)
START_PARAMS = (_GAP_LIMIT,)
UNREAD = "(n.id > %s OR n.id = ANY(%s))"
"""The condition of :data:`charter.stores.flags.NOTED_SQL` on PostgreSQL (:meth:`params`)."""
