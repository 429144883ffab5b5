"""SQLite store internals: connections, migrations, and one group commit's pending writes.

Split from :mod:`charter.stores.sqlite` (the store itself); nothing here is public beyond
``migrate``, which that module re-exports.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Any

from charter.contracts.canonical import canonical_bytes_noting
from charter.errors import LedgerIntegrityError
from charter.ledger.append import AppendPlan, EventColumns
from charter.ledger.chain import Head, LedgerKey, new_head
from charter.ledger.checker import storage_class
from charter.ledger.events import format_at
from charter.ledger.projections import TABLES, Row, RowKey
from charter.ledger.rows import parse_own
from charter.ledger.trust import LedgerTrust
from charter.stores import migrations
from charter.stores._sql import DATA_AT, RowOpener, list_sql, select_sql, upsert_params, upsert_sql
from charter.stores.sqlite_edits import EditWatch

logger = logging.getLogger("charter.stores.sqlite")
# Checkpoint when the WAL holds this many pages (SQLite's default is 1000). A batch appending to
# many runs dirties a few pages per run, and a page rewritten by many commits is copied back
# once per checkpoint: checkpointing a quarter as often saves the writer about a sixth of its
# commit time under concurrent writers. Every commit still syncs the WAL (durability is the
# same); the WAL file grows to about 16 MB instead of 4 MB.
CHECKPOINT_PAGES = 4000


BUSY_TIMEOUT_MS = 10_000  # how long a statement waits for another connection's lock

# The append path's statements, built once (TABLES is complete once projections is imported).
_SELECT = {name: select_sql(spec, "?") for name, spec in TABLES.items()}
_UPSERT = {name: upsert_sql(spec, "?") for name, spec in TABLES.items()}
_NONE: frozenset[str] = frozenset()  # "no run edited"


def _connect(path: str, *, readonly: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if readonly:
        conn.execute("PRAGMA query_only = 1")
    else:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
    return conn


def migrate(conn: sqlite3.Connection, *, where: str) -> int:
    """Bring the schema up to date (or refuse a newer one); return the version."""
    known = len(migrations.SQLITE)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {migrations.SCHEMA_TABLE} "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        (found,) = conn.execute(
            f"SELECT coalesce(max(version), 0) FROM {migrations.SCHEMA_TABLE}"
        ).fetchone()
        migrations.check_not_newer(found, known, where=where)
        if 0 < found < known:
            # Some migrations rewrite a table (6 copies the events): on a large ledger the
            # store takes a while to open, and the operator should know why.
            logger.info("migrating %s from schema version %d to %d", where, found, known)
        for version in range(found + 1, known + 1):
            try:
                for statement in migrations.SQLITE[version - 1]:
                    if callable(statement):
                        statement(conn)
                    else:
                        conn.execute(statement)
            except sqlite3.OperationalError as exc:
                mismatch = migrations.schema_mismatch(version, exc, where=where)
                if mismatch is None:
                    raise
                raise mismatch from None
            conn.execute(
                f"INSERT INTO {migrations.SCHEMA_TABLE} VALUES (?, ?)",
                (version, format_at(datetime.now(UTC))),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return known


def _head(conn: sqlite3.Connection, run_id: str) -> Head | None:
    got = conn.execute(
        "SELECT seq, hash, mac FROM run_heads WHERE run_id = ?", (run_id,)
    ).fetchone()
    return None if got is None else _as_head(run_id, got[0], got[1], got[2])


def _heads(conn: sqlite3.Connection, run_ids: Collection[str]) -> dict[str, Head]:
    """The heads of ``run_ids`` that exist, in one query."""
    marks = ", ".join("?" * len(run_ids))
    cur = conn.execute(
        f"SELECT run_id, seq, hash, mac FROM run_heads WHERE run_id IN ({marks})", tuple(run_ids)
    )
    return {r: _as_head(r, seq, h, mac) for r, seq, h, mac in cur}


def _as_head(run_id: str, seq: object, hash_: object, mac: object) -> Head:
    """A head row as read, refused when a column is not of the type this store writes.

    SQLite keeps whatever a hand edit stores that its INTEGER column cannot convert (text
    such as ``'x'``, a fractional REAL such as ``22.5``), which would break every comparison
    with an event's sequence. Such a row is damage, reported as the head not matching the
    ledger.
    """
    if type(seq) is int and type(hash_) is str and type(mac) is str:
        return Head(run_id=run_id, seq=seq, hash=hash_, mac=mac)
    column, value = next(
        (c, v)
        for c, v, t in (("seq", seq, int), ("hash", hash_, str), ("mac", mac, str))
        if type(v) is not t
    )
    raise LedgerIntegrityError(
        f"run {run_id}'s head row is damaged: its {column} is stored as "
        f"{storage_class(value)}, which this store never writes",
        reason="LEDGER_HEAD_MISMATCH",
        run_id=run_id,
    )


def stored_blob(run_id: str, seq: int, data: object) -> bytes:
    """An event row's ``data`` as read: its bytes, refused when it is not a BLOB (a hand
    edit: the writer stores every event's bytes as a BLOB)."""
    if type(data) is bytes:
        return data
    raise LedgerIntegrityError(
        f"event {seq} of run {run_id} is damaged: its bytes are stored as "
        f"{storage_class(data)}, not as a BLOB",
        reason="LEDGER_HASH_MISMATCH",
        seq=seq,
        run_id=run_id,
    )


def _row(conn: sqlite3.Connection, key: RowKey, opener: RowOpener) -> Row | None:
    got = conn.execute(_SELECT[key.table], key.key).fetchone()
    return opener.opt(key.table, got)


def _list(conn: sqlite3.Connection, table: str, run_id: str, opener: RowOpener) -> list[Row]:
    sql = list_sql(TABLES[table], "?")
    return opener.many(table, conn.execute(sql, (run_id,)).fetchall(), listing=False)


def _text_of(data: object) -> str:
    return data.decode() if isinstance(data, bytes) else str(data)


_SAFE_INT = 2**53 - 1


def _flat(row: Row) -> bool:
    """Whether ``row``'s canonical text parses back to an equal dict, keys in the same order:
    ASCII keys already sorted, values strings, booleans, None or integers within the
    canonical range (a run's call count). Anything else goes the round trip."""
    last = ""
    for key, value in row.items():
        if type(key) is not str or key <= last or not key.isascii():
            return False
        last = key
        kind = type(value)
        if kind is int:
            if not -_SAFE_INT <= value <= _SAFE_INT:
                return False
        elif kind is not str and kind is not bool and value is not None:
            return False
    return True


class HotRows:
    """The projection rows this process's writer committed, kept for its next appends.

    The writer thread is the process's only writer. While no other connection commits (SQLite's
    ``PRAGMA data_version`` on the writer's connection changes only for commits of other
    connections: another process, an operator's edit, this process's rare side writes), the
    rows it wrote are what the database holds, so an append reads them from here instead of a
    SELECT, a MAC check and a parse. A run created by this writer is *owned*: every one of its
    rows is here, so a key that is missing is a row that does not exist. Anything else is read
    (and MAC-checked) from the database as before and kept. Only the writer thread touches it.
    """

    LIMIT = 20_000

    def __init__(self, trust: LedgerTrust) -> None:
        self.rows: dict[RowKey, str] = {}
        self.parsed: dict[RowKey, Row] = {}
        """Rows of ``rows`` already parsed: every batch reads the run's context and run rows
        again, and a parse is dearer than a copy. Never handed out: readers get shallow
        copies (projection handlers build new rows; they do not change the ones they read)."""
        self.heads: dict[str, Head] = {}
        self.owned: set[str] = set()
        self.version: int | None = None
        self.edits = EditWatch(trust)  # runs edited or quarantined (readers poll it too)

    def check(self, conn: sqlite3.Connection) -> AbstractSet[str]:
        """At the start of a write transaction: forget everything if another connection
        committed since this writer last looked; the runs whose events it edited, if any."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        if version == self.version:
            return _NONE
        self.clear()
        self.version = version
        return self.edits.poll(conn, version)

    def clear(self) -> None:
        self.rows.clear()
        self.parsed.clear()
        self.heads.clear()
        self.owned.clear()

    def read_heads(self, conn: sqlite3.Connection, run_ids: Collection[str]) -> dict[str, Head]:
        """The heads of ``run_ids`` that exist: the ones this writer moved from memory, the
        rest in one query."""
        known = {r: self.heads[r] for r in run_ids if r in self.heads}
        if len(known) < len(run_ids):
            known.update(_heads(conn, [r for r in run_ids if r not in known]))
        return known

    def committed(self, pending: _Pending) -> None:
        """After COMMIT: keep what the batch wrote."""
        if len(self.rows) + len(pending.rows) > self.LIMIT:
            self.clear()
            return
        rows, parsed = self.rows, self.parsed
        for key, params in pending.rows.items():
            rows[key] = str(params[DATA_AT])
            row = pending.parsed.get(key)
            if row is None:
                parsed.pop(key, None)
            else:
                parsed[key] = row
        self.heads.update(pending.moved)
        self.owned.update(pending.new_runs)


class _Pending:
    """One batch's appends as planned, written at its end with one statement per kind.

    ``heads`` starts as the batch's heads read in one query; each planned append moves its
    run's head there and leaves its projection rows in ``planned``, so a later append of the
    same batch reads them as a read in the transaction would (the rows decoded from their
    canonical text). A row is sealed (MAC) and turned into statement parameters (``rows``) only
    in :meth:`write`: most appends of a batch rewrite the run's call count, whose last version
    alone is written.
    """

    def __init__(
        self,
        heads: dict[str, Head],
        opener: RowOpener,
        mac_key: LedgerKey | None,
        hot: HotRows | None = None,
        *,
        head_key: LedgerKey,
    ) -> None:
        self.heads = heads
        self.opener = opener
        self.hot = hot
        self.mac_key = mac_key
        self.head_key = head_key
        self.events: list[EventColumns] = []
        self.moved: dict[str, Head] = {}
        self.new_runs: set[str] = set()
        self.planned: dict[RowKey, Row] = {}
        self.seqs: dict[RowKey, int] = {}  # the row_seq of each row in ``planned``
        self.texts: dict[RowKey, bytes] = {}  # canonical bytes of planned rows, once needed
        self.parsed: dict[RowKey, Row] = {}  # planned rows parsed back (see HotRows.parsed)
        self.rows: dict[RowKey, tuple[object, ...]] = {}
        """The upsert parameters of every planned row, once :meth:`write` has built them."""
        self.proven: dict[int, Any] = {}
        """Nested values of the batch's payloads proven canonical-simple, which the rows
        built from them hold too: their rows' encoding does not walk them again
        (:func:`~charter.contracts.canonical.canonical_bytes_noting`)."""

    def row(self, conn: sqlite3.Connection, key: RowKey) -> Row | None:
        # A row is served as a copy of its parsed text (the handlers build new rows and do
        # not change the ones they read, so a shallow copy keeps the kept one intact).
        planned = self.planned.get(key)
        if planned is not None:
            written = self.parsed.get(key)
            if written is None:
                if _flat(planned):  # its text parses back to an equal dict: no round trip
                    return dict(planned)
                data = self.texts[key] = canonical_bytes_noting(planned, self.proven)
                written = self.parsed[key] = parse_own(data)
            return dict(written)
        hot = self.hot
        if hot is None:
            return _row(conn, key, self.opener)
        text = hot.rows.get(key)
        if text is not None:
            self.opener.trust.refuse_if_invalid(key.key[0])
            kept = hot.parsed.get(key)
            if kept is None:  # a row this writer wrote (read rows are kept parsed at once)
                kept = hot.parsed[key] = parse_own(text)
            return dict(kept)
        if key.key[0] in hot.owned:
            return None  # every row of an owned run is kept: this one does not exist
        got = conn.execute(_SELECT[key.table], key.key).fetchone()
        row = self.opener.opt(key.table, got)
        self.opener.trust.check_fresh(key, None if got is None else got[1])
        if got is None or row is None:
            return None
        hot.rows[key] = _text_of(got[0])
        hot.parsed[key] = row  # parsed (after its MAC) from the stored text: kept, not served
        return dict(row)

    def add(self, plan: AppendPlan) -> None:
        self.events.extend(plan.columns)
        self.heads[plan.run_id] = self.moved[plan.run_id] = plan.head
        if plan.new_run:
            self.new_runs.add(plan.run_id)
        self.planned.update(plan.writes)
        self.seqs.update(plan.seqs)
        texts, parsed = self.texts, self.parsed
        for key in plan.writes:
            texts.pop(key, None)
            parsed.pop(key, None)

    def seal_heads(self) -> None:
        """Give each run's last head of the batch its MAC (the planner left them unsealed)."""
        mac = self.head_key.mac
        for run_id, h in self.moved.items():
            self.heads[run_id] = self.moved[run_id] = new_head(
                run_id, h.seq, h.hash, mac(run_id, h.seq, h.hash)
            )

    def write(self, conn: sqlite3.Connection) -> None:
        self.seal_heads()
        if self.events:
            conn.executemany(
                "INSERT INTO events (run_id, seq, type, at, prev_hash, hash, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                self.events,
            )
        by_table: dict[str, list[tuple[object, ...]]] = {}
        params, seqs, texts, mac_key = self.rows, self.seqs, self.texts, self.mac_key
        proven = self.proven
        for key, row in self.planned.items():
            data = texts.get(key)
            if data is None:
                data = canonical_bytes_noting(row, proven)
            one = params[key] = upsert_params(key, row, seqs[key], mac_key, data)
            by_table.setdefault(key.table, []).append(one)
        for table, rows in by_table.items():
            conn.executemany(_UPSERT[table], rows)
        heads = self.moved.values()
        created = [(h.run_id, h.seq, h.hash, h.mac) for h in heads if h.run_id in self.new_runs]
        moved = [(h.seq, h.hash, h.mac, h.run_id) for h in heads if h.run_id not in self.new_runs]
        if created:
            conn.executemany(
                "INSERT INTO run_heads (run_id, seq, hash, mac) VALUES (?, ?, ?, ?)", created
            )
        if moved:
            conn.executemany(
                "UPDATE run_heads SET seq = ?, hash = ?, mac = ? WHERE run_id = ?", moved
            )


def _begin_now(conn: sqlite3.Connection) -> bool:
    """Open the write transaction only if no other connection holds the write lock: on the
    event loop's thread a busy wait (up to ``BUSY_TIMEOUT_MS``) would stall every request.
    False on any error: the writer thread then tries, and meets it where it is handled."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return True
