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
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool

from charter.errors import StoreError
from charter.ledger.append import AppendPlan, check_in_flight, plan_append, rows_needed
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import Event, NewEvent, StoredEvent, format_at
from charter.ledger.lifecycle import NOTHING_IN_FLIGHT, InFlightCalls
from charter.ledger.ports import RunSnapshot, RunSummary, StoredSnapshot
from charter.ledger.projections import RUN_TABLES, TABLES, Row, RowKey, run_key
from charter.ledger.trust import (
    HeadNotVerified,
    LedgerTrust,
    RowUnsealed,
    RunLedgerInvalid,
    RunProblem,
)
from charter.ledger.views import TypedReads
from charter.stores import migrations
from charter.stores._sql import (
    LISTING_COLUMNS,
    RowOpener,
    list_sql,
    query_sql,
    read_columns,
    read_width,
    seal_params,
    seal_sql,
    select_sql,
    upsert_params,
    upsert_sql,
)
from charter.stores.builds import PostgresBuilds
from charter.stores.flags import (
    ALL_FLAGS,
    NOTED_SQL,
    ROWLESS_GATE_SQL,
    ROWLESS_SQL,
    UPSERT_FINDING,
    UPSERT_QUARANTINE,
    checking_key,
    flag_problem,
    flag_problems,
    listed_count,
    listed_flags,
    listed_problem,
    quarantine_row,
    refuse_noted,
    rowless_summaries,
)
from charter.stores.leases import PostgresLeases
from charter.stores.locks import LocalRunLocks
from charter.stores.postgres_conversations import PostgresConversations
from charter.stores.postgres_edits import START_PARAMS, START_SQL, UNREAD, EditCursor
from charter.stores.postgres_errors import LOG_SCRUB, connect_failure, mask_url
from charter.stores.postgres_errors import translate_psycopg_error as translate_psycopg_error
from charter.stores.postgres_errors import translated as _translated
from charter.stores.vanished import VANISHED_SQL, run_ids, vanished_params

T = TypeVar("T")
# A listed run: its row as RowOpener reads it, then its head and its ledger flags.
_RUN_COLUMNS = read_columns(TABLES["runs"], "r.")
_RUN_WIDTH = read_width(TABLES["runs"])
_RUN_KEYED = 3 + len(TABLES["runs"].keys)  # where a run row's indexed columns start
logger = logging.getLogger(__name__)
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
                try:
                    for statement in migrations.POSTGRES[version - 1]:
                        if callable(statement):
                            await statement(conn)
                        else:
                            await conn.execute(statement)
                except (
                    psycopg.errors.DuplicateTable,
                    psycopg.errors.DuplicateObject,
                    psycopg.errors.DuplicateColumn,
                    psycopg.errors.DuplicateFunction,
                ) as exc:
                    mismatch = migrations.schema_mismatch(version, exc, where=where)
                    if mismatch is None:
                        raise
                    raise mismatch from None
                await conn.execute(
                    f"INSERT INTO {migrations.SCHEMA_TABLE} VALUES (%s, %s)",
                    (version, format_at(datetime.now(UTC))),
                )
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return known


_HEAD_SQL = "SELECT seq, hash, mac FROM run_heads WHERE run_id = %s"
_EDITS_SQL = NOTED_SQL.format(after=UNREAD)
"""Events updated or deleted since this process last looked (the ``ledger_edits`` triggers:
Charter only inserts events), and runs quarantined since, with their marks. Read in every
append's transaction and beside every read of a run's rows, so a quarantine made by another
process or replica refuses the run here before its next append or read — with no listener
connection whose loss could hide it (and ids committed out of order are asked for again:
:mod:`charter.stores.postgres_edits`). See :mod:`charter.stores.sqlite_edits`."""


def _as_head(run_id: str, got: Any) -> Head | None:
    return None if got is None else Head(run_id=run_id, seq=got[0], hash=got[1], mac=got[2])


async def _head(conn: psycopg.AsyncConnection[Any], run_id: str) -> Head | None:
    cur = await conn.execute(_HEAD_SQL, (run_id,))
    return _as_head(run_id, await cur.fetchone())


async def _row(conn: psycopg.AsyncConnection[Any], key: RowKey, opener: RowOpener) -> Row | None:
    cur = await conn.execute(select_sql(TABLES[key.table], "%s"), key.key)
    return opener.opt(key.table, await cur.fetchone())


async def _list(
    conn: psycopg.AsyncConnection[Any], table: str, run_id: str, opener: RowOpener
) -> list[Row]:
    cur = await conn.execute(list_sql(TABLES[table], "%s"), (run_id,))
    return opener.many(table, await cur.fetchall(), listing=False)


def _refusal(failure: str) -> StoreError:
    return StoreError(
        f"the store stopped accepting writes after a storage error ({failure}); nothing was "
        "written. Restart once the server's storage is healthy.",
        reason="STORE_FAILED",
    )


async def _read_after(
    conn: psycopg.AsyncConnection[Any], run_id: str, after: int
) -> list[StoredEvent]:
    cur = await conn.execute(
        "SELECT seq, type, at, prev_hash, hash, data FROM events "
        "WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT 1000",
        (run_id, after),
    )
    return [
        StoredEvent(run_id=run_id, seq=s, type=t, at=a, prev_hash=p, hash=h, data=bytes(d))
        for s, t, a, p, h, d in await cur.fetchall()
    ]


_TRUST_ATTEMPTS = 4  # appends tried again after verifying what another process appended


class PostgresStore(TypedReads, PostgresConversations, PostgresLeases, PostgresBuilds):
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
        self.trust = LedgerTrust(key)
        self._edits = EditCursor()  # the ledger_edits entries read (the last set on start)
        """What this process verified of each run, and the runs it refuses."""
        self.failure: str | None = None
        """Why the store stopped accepting writes (fail-stop), or None."""
        self._opener = RowOpener(self.trust)
        self._background: set[asyncio.Task[None]] = set()

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str, **options: Any) -> AsyncIterator[PostgresStore]:
        store = cls(url, **options)
        await store.start()
        try:
            yield store
        finally:
            await store.aclose()

    def __repr__(self) -> str:
        return f"PostgresStore({mask_url(self.url)!r})"

    async def start(self) -> None:
        LOG_SCRUB.learn(self.url)
        try:
            await self._start()
        except BaseException:
            LOG_SCRUB.forget(self.url)
            raise

    async def _start(self) -> None:
        # One direct connection first: a bad URL, a refused connection, an unknown role or a
        # wrong password fails at once with its reason (the pool would retry it in the
        # background until open_timeout and say only PoolTimeout).
        try:
            async with asyncio.timeout(self._open_timeout):
                first = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        except (psycopg.Error, TimeoutError) as exc:
            raise connect_failure(exc, self.url) from None
        with _translated():
            async with first as conn:
                await migrate(conn, where="(postgresql)")
                cur = await conn.execute(START_SQL, START_PARAMS)
                self._edits.start(await cur.fetchall())
            await self._pool.open(wait=True, timeout=self._open_timeout)
        for problem in await self.run_flags():
            if problem.marked:  # a quarantine mark, or one forged or lifted: refused
                self.trust.quarantine(problem)
        self.trust.on_invalid(self._on_invalid)

    async def aclose(self) -> None:
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        await self._pool.close()
        LOG_SCRUB.forget(self.url)

    # -- run-time trust ------------------------------------------------------------------

    async def seal_rows(self, run_id: str, seq: int, rows: dict[RowKey, Row]) -> None:
        """Give the run's rows that have no MAC yet (written before rows carried one) their
        MAC, where they still hold the text of ``rows`` (rebuilt from verified events)."""
        if not self.trust.enabled:
            return
        with _translated():
            async with self._pool.connection() as conn:
                unsealed = False
                for t in ("runs", *RUN_TABLES):
                    cur = await conn.execute(
                        f"SELECT 1 FROM {t} WHERE run_id = %s AND row_mac IS NULL LIMIT 1",
                        (run_id,),
                    )
                    if await cur.fetchone():
                        unsealed = True
                        break
                if not unsealed:
                    return
                async with conn.transaction(), conn.cursor() as cur:
                    for table, batch in seal_params(rows, run_id, seq, self.key).items():
                        await cur.executemany(seal_sql(TABLES[table], "%s"), batch)

    def _on_invalid(self, problem: RunProblem) -> None:
        """Trust listener: record the finding in run_ledger_flags, in the background."""
        if problem.quarantined:
            return
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to record with
            task = asyncio.get_running_loop().create_task(self._record_finding(problem))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _record_finding(self, problem: RunProblem) -> None:
        values = (
            problem.run_id,
            problem.reason,
            problem.seq,
            problem.message,
            format_at(self._clock()),
        )
        try:
            with _translated():
                async with self._pool.connection() as conn:
                    await conn.execute(UPSERT_FINDING.format(p="%s"), values)
        except StoreError as exc:
            logger.error("could not record the finding on run %s: %s", problem.run_id, exc)

    async def quarantine(self, run_id: str, *, by: str, reason: str) -> RunProblem:
        """Mark ``run_id`` quarantined: every process refuses it (a running one from its next
        append or read of it: charter.stores.flags)."""
        found, now = self.trust.problem(run_id), format_at(self._clock())
        values, problem = quarantine_row(self.key, run_id, found, by=by, reason=reason, now=now)
        with _translated():
            async with self._pool.connection() as conn:
                await conn.execute(UPSERT_QUARANTINE.format(p="%s"), values)
        self.trust.quarantine(problem)
        return problem

    async def run_flags(self) -> list[RunProblem]:
        """Every flagged run (found damaged by some process, or quarantined)."""
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(ALL_FLAGS)
                return flag_problems(await cur.fetchall(), checking_key(self.trust))

    async def vanished(self, table: str, key: str) -> list[str]:
        """Runs that held a ``table`` row of id ``key`` deleted outside Charter."""
        with _translated():
            async with self._pool.connection() as conn:
                sql = VANISHED_SQL.format(p="%s").encode()
                cur = await conn.execute(sql, vanished_params(table, key))
                return run_ids(await cur.fetchall())

    # -- EventLog -------------------------------------------------------------------------

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        if self.failure is not None:
            raise _refusal(self.failure)
        await check_in_flight(self._in_flight, run_id, entries)
        if not (entries and entries[0].type == "run_created"):
            await self.trust.ensure(self, run_id)
        last: RowUnsealed | None = None
        for _ in range(_TRUST_ATTEMPTS):
            try:
                return await self._append(run_id, entries, expected_seq)
            except StoreError as exc:
                if exc.reason == "STORE_FAILED" and self.failure is None:
                    self.failure = exc.message  # fail-stop: no more writes from this process
                    logger.critical(
                        "PostgreSQL store stopped accepting writes after a storage error (%s);"
                        " restart once the server's storage is healthy",
                        exc.message,
                    )
                raise
            except HeadNotVerified:
                await self.trust.catch_up(self, run_id)  # another process appended
            except RowUnsealed as exc:
                await self.trust.refresh(self, exc.run_id)
                last = exc
        if last is not None:
            raise self.trust.past_head(last.run_id)
        raise StoreError(
            "the run's head kept moving while this append was checked; try again",
            reason="STORE_BUSY",
            retryable=True,
            run_id=run_id,
        )

    async def _append(
        self, run_id: str, entries: Sequence[NewEvent], expected_seq: int | None
    ) -> Sequence[Event]:
        opener = self._opener
        with _translated():
            # Pipelined: BEGIN, the head's row lock and every projection read travel in one
            # round trip; the writes and COMMIT in a second.
            async with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
                head_cur = await conn.execute(_HEAD_SQL + " FOR UPDATE", (run_id,))
                edits_cur = await conn.execute(_EDITS_SQL, self._edits.params())
                reads = [
                    (k, await conn.execute(select_sql(TABLES[k.table], "%s"), k.key))
                    for k in rows_needed(run_id, entries)
                ]
                head = _as_head(run_id, await head_cur.fetchone())
                # events edited by hand: those runs are verified again, in full
                self._note_edits(await edits_cur.fetchall())
                try:
                    self.trust.check_head(run_id, head)
                except HeadNotVerified:
                    # Another process (or coroutine) appended since: verify its events here,
                    # under the head's row lock, instead of losing the race again outside.
                    await self.trust.verify_to(run_id, head, partial(_read_after, conn, run_id))
                rows: dict[RowKey, Row | None] = {}
                for k, cur in reads:
                    got = await cur.fetchone()
                    rows[k] = opener.opt(k.table, got)
                    self.trust.check_fresh(k, None if got is None else got[1])
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
            self.trust.advance(plan.head)
            self.trust.wrote(plan.seqs)
            self._wake()
        return plan.events

    async def _write(self, conn: psycopg.AsyncConnection[Any], plan: AppendPlan) -> None:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO events (run_id, seq, type, at, prev_hash, hash, data) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (e.run_id, e.seq, e.type, e.at, e.prev_hash, e.hash, d)
                    for e, d in zip(plan.events, plan.data, strict=True)
                ],
            )
        mac_key = self.key if self.trust.enabled else None
        for key, row in plan.writes.items():
            await conn.execute(
                upsert_sql(TABLES[key.table], "%s"),
                upsert_params(key, row, plan.seqs[key], mac_key),
            )
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

    def _note_edits(self, edited: Sequence[Any], run_id: str | None = None) -> None:
        """Forget as verified the runs ``ledger_edits`` noted since this process last looked;
        :class:`RowUnsealed` when ``run_id`` (whose rows were just read) is one of them."""
        self._edits.advance(edited)
        if not edited:
            return
        runs = refuse_noted(edited, self.trust)  # a run quarantined since: refused from now
        self.trust.forget(runs)
        if run_id in runs:
            raise RowUnsealed(run_id)

    async def _run_read(self, run_id: str, fetch: Callable[[Any], Awaitable[T]]) -> T:
        """``fetch`` (a read of ``run_id``'s rows) with a look at ``ledger_edits`` in the same
        round trip: rows deleted or events edited under this process since it verified the
        run (by another replica's host, or by hand) send the run through verification again
        (:meth:`_checked`), as SQLite's reads do (:mod:`charter.stores.sqlite_edits`)."""
        with _translated():
            async with self._pool.connection() as conn, conn.pipeline():
                edits = await conn.execute(_EDITS_SQL, self._edits.params())
                got = await fetch(conn)
                edited = await edits.fetchall()
        self._note_edits(edited, run_id)
        return got

    async def _checked(self, read: Callable[[], Awaitable[T]]) -> T:
        """Run ``read`` (of projection rows); a row of a run this process has not verified
        (up to the row) sends that run through verification first, then the read again."""
        for _ in range(_TRUST_ATTEMPTS):
            try:
                return await read()
            except RowUnsealed as exc:
                await self.trust.refresh(self, exc.run_id)
        try:
            return await read()
        except RowUnsealed as exc:  # still past the verified head: refuse the run
            raise self.trust.past_head(exc.run_id) from None

    async def get_row(self, key: RowKey) -> Row | None:
        run_id = key.key[0]
        await self.trust.ensure(self, run_id)
        opener = self._opener
        return await self._checked(
            lambda: self._run_read(run_id, lambda conn: _row(conn, key, opener))
        )

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]:
        await self.trust.ensure(self, run_id)
        opener = self._opener
        return await self._checked(
            lambda: self._run_read(run_id, lambda conn: _list(conn, table, run_id, opener))
        )

    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        sql = query_sql(TABLES[table], tuple(where), "%s")
        listing = LISTING_COLUMNS.issuperset(where)

        async def fetch(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(sql, (*where.values(), limit))
            return await cur.fetchall()

        async def read() -> list[Row]:
            if run is not None:  # one run's rows: checked as list_rows does
                got = await self._run_read(run, fetch)
            else:
                with _translated():
                    async with self._pool.connection() as conn:
                        got = await fetch(conn)
            return self._opener.many(table, got, listing=listing)

        run = where.get("run_id") if isinstance(where.get("run_id"), str) else None
        if run is not None:
            await self.trust.ensure(self, run)
        return await self._checked(read)

    async def list_runs(
        self, *, limit: int = 100, tenant: str | None = None
    ) -> Sequence[RunSummary]:
        where, params = (
            ("WHERE r.tenant = %s ", (tenant, limit)) if tenant is not None else ("", (limit,))
        )
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT {_RUN_COLUMNS}, h.seq, "
                    + listed_flags("r.run_id")
                    + " FROM runs r LEFT JOIN run_heads h ON h.run_id = r.run_id "
                    "LEFT JOIN run_ledger_flags f ON f.run_id = r.run_id "
                    f"{where}ORDER BY r.created_at DESC, r.run_id DESC LIMIT %s",
                    params,
                )
                rows = await cur.fetchall()
                rowless = []
                cur = await conn.execute(ROWLESS_GATE_SQL)
                gate = await cur.fetchone()
                if gate is not None and gate[0]:
                    cur = await conn.execute(ROWLESS_SQL)
                    rowless = rowless_summaries(
                        await cur.fetchall(), tenant, checking_key(self.trust)
                    )
        return (rowless + [self._summary(got) for got in rows])[:limit]

    def _summary(self, got: Sequence[Any]) -> RunSummary:
        """A run listed with its ledger state (as in the SQLite store)."""
        run_id = str(got[3])
        count, damaged = listed_count(run_id, got[_RUN_WIDTH])
        key = checking_key(self.trust)
        flagged = damaged or flag_problem(run_id, got[_RUN_WIDTH + 1 :], key)
        try:
            run = self._opener.listed("runs", got[:_RUN_WIDTH])
        except RunLedgerInvalid as exc:
            return RunSummary(run={"run_id": run_id}, event_count=count, problem=exc.problem)
        return RunSummary(
            run=run, event_count=count, problem=listed_problem(self.trust, run_id, flagged)
        )

    async def snapshot(self, run_id: str) -> RunSnapshot | None:
        await self.trust.ensure(self, run_id)

        async def read() -> RunSnapshot | None:
            opener = self._opener
            with _translated():
                async with self._pool.connection() as conn, conn.transaction():
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    head = await _head(conn, run_id)
                    if head is None:
                        return None
                    return RunSnapshot(
                        head=head,
                        run=await _row(conn, run_key(run_id), opener),
                        tables={t: await _list(conn, t, run_id, opener) for t in RUN_TABLES},
                    )

        return await self._checked(read)

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
                columns = {"runs": [] if run is None else [tuple(run[_RUN_KEYED:])]}
                for t in RUN_TABLES:
                    cur = await conn.execute(list_sql(TABLES[t], "%s"), (run_id,))
                    got = await cur.fetchall()
                    tables[t] = [str(r[0]).encode() for r in got]
                    columns[t] = [tuple(r[4:]) for r in got]  # spec.compared: after run_id
                return StoredSnapshot(
                    head=head,
                    run=None if run is None else str(run[0]).encode(),
                    tables=tables,
                    columns=columns,
                )
