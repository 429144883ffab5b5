"""Events edited under a running process: noticed, and their runs verified again.

A process verifies a run the first time it touches it, then only checks that each append
builds on the head it verified (:mod:`charter.ledger.trust`). An event deleted or changed in
the middle of a run afterwards leaves the head as it was, so the process would go on
appending to a run that no longer verifies — until a restart verified it again.

Charter only ever inserts events. Two triggers (the ``ledger_edits`` migration) record the
run of every event that is updated or deleted in the table ``ledger_edits``; a process reads
the entries added since it last looked whenever SQLite says another connection committed
(``PRAGMA data_version``, a read of shared memory: no I/O) and forgets that it verified those
runs (:meth:`~charter.ledger.trust.LedgerTrust.forget`). The next append to such a run, or
read of its rows, verifies it in full first: a run that no longer verifies is refused with
the problem found (a gap, a hash mismatch), one whose edit changed nothing goes on.

The same entries carry quarantines (:mod:`charter.stores.flags`): a mark made or lifted by
another process is noted there, and the poll that sees the note reads the run's mark in the
same statement and refuses the run (before the writer plans an append to it, before a reader
serves its rows) — no restart needed, and no query while nothing was committed elsewhere.

Someone who can edit the database can drop the triggers too; the edits they make afterwards
are found when a process next touches the run for the first time, as before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from charter.ledger.trust import LedgerTrust, RowUnsealed
from charter.stores.flags import NOTED_SQL, refuse_noted

T = TypeVar("T")

_AFTER = NOTED_SQL.format(after="n.id > ?")  # ids in commit order: one writer at a time


class EditWatch:
    """The last ``ledger_edits`` entry this process has seen, shared by its connections."""

    def __init__(self, trust: LedgerTrust) -> None:
        self.trust = trust
        self.seen: int | None = None
        self._lock = threading.Lock()
        self._versions: dict[int, int] = {}  # data_version last seen, per connection (id)

    def start(self, conn: sqlite3.Connection) -> None:
        """Begin after the entries already there (the process verifies every run it touches
        for the first time in full: what was edited before it started is found then)."""
        (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM ledger_edits").fetchone()
        with self._lock:
            self.seen = int(last)

    def poll(self, conn: sqlite3.Connection, version: int | None = None) -> set[str]:
        """The runs edited since this process last looked, when another connection committed
        since ``conn`` last asked (else nothing, without a query). ``version``: the
        ``data_version`` the caller just read on ``conn``. A run quarantined since is refused
        before the lock is let go: no other connection of this process sees the entries
        after it without the run already refused."""
        if version is None:
            (version,) = conn.execute("PRAGMA data_version").fetchone()
        if self._versions.get(id(conn)) == version or self.seen is None:
            return set()
        self._versions[id(conn)] = version
        with self._lock:
            rows = conn.execute(_AFTER, (self.seen,)).fetchall()
            if not rows:
                return set()
            self.seen = max(self.seen, rows[-1][0])
            return refuse_noted(rows, self.trust)


def edits_first(
    fn: Callable[[sqlite3.Connection], T], run_id: str, watch: EditWatch, trust: LedgerTrust
) -> Callable[[sqlite3.Connection], T]:
    """``fn``, a read of ``run_id``'s rows, after a look at ``ledger_edits``: runs edited
    since are forgotten as verified, and when ``run_id`` is one of them the read raises
    :class:`~charter.ledger.trust.RowUnsealed` (the store verifies the run, then reads)."""

    def read(conn: sqlite3.Connection) -> T:
        edited = watch.poll(conn)
        if edited:
            trust.forget(edited)
            if run_id in edited:
                raise RowUnsealed(run_id)
        return fn(conn)

    return read
