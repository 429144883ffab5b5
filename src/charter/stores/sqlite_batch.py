"""SQLite store internals: connections, migrations, and one group commit's pending writes.

Split from :mod:`charter.stores.sqlite` (the store itself); nothing here is public beyond
``migrate``, which that module re-exports.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Collection
from datetime import UTC, datetime

from charter.ledger.append import AppendPlan
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.events import format_at
from charter.ledger.projections import TABLES, Row, RowKey
from charter.stores import migrations
from charter.stores._sql import DATA_AT, RowOpener, list_sql, select_sql, upsert_params, upsert_sql

logger = logging.getLogger("charter.stores.sqlite")
# Checkpoint when the WAL holds this many pages (SQLite's default is 1000). A batch appending to
# many runs dirties a few pages per run, and a page rewritten by many commits is copied back
# once per checkpoint: checkpointing a quarter as often saves the writer about a sixth of its
# commit time under concurrent writers. Every commit still syncs the WAL (durability is the
# same); the WAL file grows to about 16 MB instead of 4 MB.
CHECKPOINT_PAGES = 4000


def _connect(path: str, *, readonly: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
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
            for statement in migrations.SQLITE[version - 1]:
                if callable(statement):
                    statement(conn)
                else:
                    conn.execute(statement)
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
    return None if got is None else Head(run_id=run_id, seq=got[0], hash=got[1], mac=got[2])


def _heads(conn: sqlite3.Connection, run_ids: Collection[str]) -> dict[str, Head]:
    """The heads of ``run_ids`` that exist, in one query."""
    marks = ", ".join("?" * len(run_ids))
    cur = conn.execute(
        f"SELECT run_id, seq, hash, mac FROM run_heads WHERE run_id IN ({marks})", tuple(run_ids)
    )
    return {r: Head(run_id=r, seq=seq, hash=h, mac=mac) for r, seq, h, mac in cur}


def _row(conn: sqlite3.Connection, key: RowKey, opener: RowOpener) -> Row | None:
    got = conn.execute(select_sql(TABLES[key.table], "?"), key.key).fetchone()
    return opener.opt(key.table, got)


def _list(conn: sqlite3.Connection, table: str, run_id: str, opener: RowOpener) -> list[Row]:
    sql = list_sql(TABLES[table], "?")
    return opener.many(table, conn.execute(sql, (run_id,)).fetchall(), listing=False)


class _Pending:
    """One batch's appends as planned, written at its end with one statement per kind.

    ``heads`` starts as the batch's heads read in one query; each planned append moves its
    run's head there and leaves its projection rows in ``rows``, so a later append of the same
    batch reads them as a read in the transaction would (the rows decoded from stored text).
    """

    def __init__(
        self, heads: dict[str, Head], opener: RowOpener, mac_key: LedgerKey | None
    ) -> None:
        self.heads = heads
        self.opener = opener
        self.mac_key = mac_key
        self.events: list[tuple[str, int, str, str, str, str, bytes]] = []
        self.moved: dict[str, Head] = {}
        self.new_runs: set[str] = set()
        self.rows: dict[RowKey, tuple[object, ...]] = {}

    def row(self, conn: sqlite3.Connection, key: RowKey) -> Row | None:
        planned = self.rows.get(key)
        if planned is None:
            return _row(conn, key, self.opener)
        return dict(json.loads(str(planned[DATA_AT])))

    def add(self, plan: AppendPlan) -> None:
        self.events.extend(
            (r.run_id, r.seq, r.type, r.at, r.prev_hash, r.hash, r.data) for r in plan.rows
        )
        self.heads[plan.run_id] = self.moved[plan.run_id] = plan.head
        if plan.new_run:
            self.new_runs.add(plan.run_id)
        for key, row in plan.writes.items():
            self.rows[key] = upsert_params(key, row, plan.seqs[key], self.mac_key)

    def write(self, conn: sqlite3.Connection) -> None:
        if self.events:
            conn.executemany(
                "INSERT INTO events (run_id, seq, type, at, prev_hash, hash, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                self.events,
            )
        by_table: dict[str, list[tuple[object, ...]]] = {}
        for key, params in self.rows.items():
            by_table.setdefault(key.table, []).append(params)
        for table, rows in by_table.items():
            conn.executemany(upsert_sql(TABLES[table], "?"), rows)
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
