"""The PostgreSQL store: several processes share one database.

psycopg 3 with an ``AsyncConnectionPool``. Appends to one run are serialized by the row lock on
the run's head (``SELECT … FOR UPDATE`` on ``run_heads``, held to the end of the append's
transaction — the per-run lock); ``(run_id, seq)`` is the events' primary key and a second
``run_created`` loses on the head's primary key, so both conflicts surface as
:class:`~charter.errors.StoreConflict`. Each append ends with ``NOTIFY charter_events`` so
subscribers on other connections and in other processes wake at once (``LISTEN`` on one
connection per store). Every psycopg exception is translated by
:mod:`charter.stores.postgres_errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool

from charter.ledger.append import AppendPlan, check_in_flight, plan_append, rows_needed
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import Event, NewEvent, StoredEvent, format_at
from charter.ledger.lifecycle import NOTHING_IN_FLIGHT, InFlightCalls
from charter.ledger.ports import RunSnapshot, RunSummary, StoredSnapshot
from charter.ledger.projections import RUN_TABLES, TABLES, Row, RowKey, run_key
from charter.ledger.views import TypedReads
from charter.stores import migrations
from charter.stores._sql import list_sql, query_sql, select_sql, upsert_params, upsert_sql
from charter.stores.locks import LocalRunLocks
from charter.stores.postgres_conversations import PostgresConversations
from charter.stores.postgres_errors import translate_psycopg_error as translate_psycopg_error
from charter.stores.postgres_errors import translated as _translated

CHANNEL = "charter_events"
_MIGRATION_LOCK = 0x43_68_61_72  # "Char": one advisory lock id for schema migrations


async def migrate(conn: psycopg.AsyncConnection[Any], *, where: str) -> int:
    """Apply missing migrations under an advisory lock (or refuse a newer schema)."""
    known = len(migrations.POSTGRES)
    await conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    try:
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {migrations.SCHEMA_TABLE} "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        cur = await conn.execute(f"SELECT coalesce(max(version), 0) FROM {migrations.SCHEMA_TABLE}")
        got = await cur.fetchone()
        found = int(got[0]) if got else 0
        migrations.check_not_newer(found, known, where=where)
        for version in range(found + 1, known + 1):
            async with conn.transaction():
                for statement in migrations.POSTGRES[version - 1]:
                    if callable(statement):
                        await statement(conn)
                    else:
                        await conn.execute(statement)
                await conn.execute(
                    f"INSERT INTO {migrations.SCHEMA_TABLE} VALUES (%s, %s)",
                    (version, format_at(datetime.now(UTC))),
                )
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return known


_HEAD_SQL = "SELECT seq, hash, mac FROM run_heads WHERE run_id = %s"


def _as_head(run_id: str, got: Any) -> Head | None:
    return None if got is None else Head(run_id=run_id, seq=got[0], hash=got[1], mac=got[2])


def _as_row(got: Any) -> Row | None:
    return None if got is None else dict(json.loads(got[0]))


async def _head(conn: psycopg.AsyncConnection[Any], run_id: str) -> Head | None:
    cur = await conn.execute(_HEAD_SQL, (run_id,))
    return _as_head(run_id, await cur.fetchone())


async def _row(conn: psycopg.AsyncConnection[Any], key: RowKey) -> Row | None:
    cur = await conn.execute(select_sql(TABLES[key.table], "%s"), key.key)
    return _as_row(await cur.fetchone())


async def _list(conn: psycopg.AsyncConnection[Any], table: str, run_id: str) -> list[Row]:
    cur = await conn.execute(list_sql(TABLES[table], "%s"), (run_id,))
    return [json.loads(r[0]) for r in await cur.fetchall()]


class PostgresStore(TypedReads, PostgresConversations):
    def __init__(
        self,
        url: str,
        *,
        key: LedgerKey,
        clock: Clock = system_clock,
        in_flight: InFlightCalls = NOTHING_IN_FLIGHT,
        min_size: int = 2,
        max_size: int = 16,
        open_timeout: float = 10.0,
    ) -> None:
        self._open_timeout = open_timeout
        self.url = url
        self.key = key
        self._clock = clock
        self._in_flight = in_flight
        self._local_locks = LocalRunLocks()
        self._pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url, min_size=min_size, max_size=max_size, open=False, kwargs={"autocommit": True}
        )
        self._tick = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str, **options: Any) -> AsyncIterator[PostgresStore]:
        store = cls(url, **options)
        await store.start()
        try:
            yield store
        finally:
            await store.aclose()

    async def start(self) -> None:
        with _translated():
            await self._pool.open(wait=True, timeout=self._open_timeout)
            async with self._pool.connection() as conn:
                await migrate(conn, where="(postgresql)")

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        await self._pool.close()

    # -- EventLog -------------------------------------------------------------------------

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        await check_in_flight(self._in_flight, run_id, entries)
        with _translated():
            # Pipelined: BEGIN, the head's row lock and every projection read travel in one
            # round trip; the writes and COMMIT in a second.
            async with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
                head_cur = await conn.execute(_HEAD_SQL + " FOR UPDATE", (run_id,))
                reads = [
                    (k, await conn.execute(select_sql(TABLES[k.table], "%s"), k.key))
                    for k in rows_needed(run_id, entries)
                ]
                head = _as_head(run_id, await head_cur.fetchone())
                rows = {k: _as_row(await cur.fetchone()) for k, cur in reads}
                plan = plan_append(
                    run_id=run_id,
                    head=head,
                    entries=entries,
                    rows=rows,
                    now=format_at(self._clock()),
                    key=self.key,
                    expected_seq=expected_seq,
                )
                await self._write(conn, plan)
            self._wake()
        return plan.events

    async def _write(self, conn: psycopg.AsyncConnection[Any], plan: AppendPlan) -> None:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO events (run_id, seq, type, at, prev_hash, hash, data) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(r.run_id, r.seq, r.type, r.at, r.prev_hash, r.hash, r.data) for r in plan.rows],
            )
        for key, row in plan.writes.items():
            await conn.execute(upsert_sql(TABLES[key.table], "%s"), upsert_params(key, row))
        h = plan.head
        if plan.new_run:
            await conn.execute(
                "INSERT INTO run_heads (run_id, seq, hash, mac) VALUES (%s, %s, %s, %s)",
                (h.run_id, h.seq, h.hash, h.mac),
            )
        else:
            await conn.execute(
                "UPDATE run_heads SET seq = %s, hash = %s, mac = %s WHERE run_id = %s",
                (h.seq, h.hash, h.mac, h.run_id),
            )
        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{h.run_id} {h.seq}"))

    def _wake(self) -> None:
        self._tick.set()
        self._tick = asyncio.Event()

    async def schema_versions(self) -> tuple[int, int]:
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT coalesce(max(version), 0) FROM {migrations.SCHEMA_TABLE}"
                )
                got = await cur.fetchone()
        return (int(got[0]) if got else 0), len(migrations.POSTGRES)

    async def head(self, run_id: str) -> Head | None:
        with _translated():
            async with self._pool.connection() as conn:
                return await _head(conn, run_id)

    async def read_stored(
        self, run_id: str, *, after: int = 0, limit: int = 1000
    ) -> Sequence[StoredEvent]:
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT seq, type, at, prev_hash, hash, data FROM events "
                    "WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                    (run_id, after, limit),
                )
                rows = await cur.fetchall()
        return [
            StoredEvent(run_id=run_id, seq=s, type=t, at=a, prev_hash=p, hash=h, data=bytes(d))
            for s, t, a, p, h, d in rows
        ]

    async def _listen(self) -> None:
        """Wake waiters on every NOTIFY from any connection or process."""
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._wake()  # anything missed while (re)connecting
                    async for _ in conn.notifies():
                        self._wake()
            except psycopg.Error:
                await asyncio.sleep(1.0)  # waiters fall back to their timeouts meanwhile

    async def wait_for_events(self, run_id: str, *, after: int, timeout: float) -> bool:
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen())
        tick = self._tick
        head = await self.head(run_id)
        if head is not None and head.seq > after:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tick.wait(), timeout)
        head = await self.head(run_id)
        return head is not None and head.seq > after

    @contextlib.asynccontextmanager
    async def run_lock(self, run_id: str) -> AsyncIterator[None]:
        """Serializes write tools of one run across replicas: a session advisory lock held on
        one pooled connection for the dispatch (released by PostgreSQL if the process dies)."""
        async with self._local_locks.hold(run_id):
            with _translated():
                async with self._pool.connection() as conn:
                    await conn.execute(
                        "SELECT pg_advisory_lock(hashtextextended(%s, 7))", (run_id,)
                    )
                    try:
                        yield
                    finally:
                        await conn.execute(
                            "SELECT pg_advisory_unlock(hashtextextended(%s, 7))", (run_id,)
                        )

    # -- ProjectionReader -----------------------------------------------------------------

    async def get_row(self, key: RowKey) -> Row | None:
        with _translated():
            async with self._pool.connection() as conn:
                return await _row(conn, key)

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]:
        with _translated():
            async with self._pool.connection() as conn:
                return await _list(conn, table, run_id)

    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        sql = query_sql(TABLES[table], tuple(where), "%s")
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(sql, (*where.values(), limit))
                return [json.loads(r[0]) for r in await cur.fetchall()]

    async def list_runs(
        self, *, limit: int = 100, tenant: str | None = None
    ) -> Sequence[RunSummary]:
        where, params = (
            ("WHERE r.tenant = %s ", (tenant, limit)) if tenant is not None else ("", (limit,))
        )
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT r.data, coalesce(h.seq, 0) FROM runs r "
                    "LEFT JOIN run_heads h ON h.run_id = r.run_id "
                    f"{where}ORDER BY r.created_at DESC, r.run_id DESC LIMIT %s",
                    params,
                )
                rows = await cur.fetchall()
        return [RunSummary(run=json.loads(d), event_count=int(n)) for d, n in rows]

    async def snapshot(self, run_id: str) -> RunSnapshot | None:
        with _translated():
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                head = await _head(conn, run_id)
                if head is None:
                    return None
                return RunSnapshot(
                    head=head,
                    run=await _row(conn, run_key(run_id)),
                    tables={t: await _list(conn, t, run_id) for t in RUN_TABLES},
                )

    async def stored_snapshot(self, run_id: str) -> StoredSnapshot | None:
        with _translated():
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                head = await _head(conn, run_id)
                if head is None:
                    return None
                key = run_key(run_id)
                cur = await conn.execute(select_sql(TABLES[key.table], "%s"), key.key)
                run = await cur.fetchone()
                tables: dict[str, list[bytes]] = {}
                for t in RUN_TABLES:
                    cur = await conn.execute(list_sql(TABLES[t], "%s"), (run_id,))
                    tables[t] = [str(r[0]).encode() for r in await cur.fetchall()]
                return StoredSnapshot(
                    head=head, run=None if run is None else str(run[0]).encode(), tables=tables
                )
