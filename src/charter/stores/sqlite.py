"""The SQLite store: the embedded default.

One dedicated writer thread owns the only writing connection (WAL, ``synchronous=FULL``) and
**group-commits**: appends queued while a commit is in progress all go into the next single
transaction, and each append's future resolves only after that transaction committed. The
batch reads its heads in one query and writes its event rows, projection rows and heads with
one statement per kind. An append whose plan is refused (a bad transition, a stale
``expected_seq``) fails alone, before it writes anything; a database error rolls the batch back
and retries its appends one by one, so one failure never takes its neighbours with it.

Readers use their own connections on a small thread pool. Every ``sqlite3`` exception is
translated into the :class:`~charter.errors.StoreError` family at this boundary. The event
loop that opened the store is the one its futures resolve on (asyncio).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from charter.errors import CharterError, MigrationError, StoreError
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
from charter.stores.locks import FileRunLocks
from charter.stores.sqlite_conversations import SQLiteConversations
from charter.stores.sqlite_errors import translate_sqlite_error

T = TypeVar("T")
logger = logging.getLogger(__name__)
_MAX_BATCH = 1024
# Checkpoint when the WAL holds this many pages (SQLite's default is 1000). A batch appending to
# many runs dirties a few pages per run, and a page rewritten by many commits is copied back
# once per checkpoint: checkpointing a quarter as often saves the writer about a sixth of its
# commit time under concurrent writers. Every commit still syncs the WAL (durability is the
# same); the WAL file grows to about 16 MB instead of 4 MB.
_CHECKPOINT_PAGES = 4000
_STOP = object()


def _as_store_error(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        return translate_sqlite_error(exc)
    if isinstance(exc, CharterError):
        return exc
    return StoreError(f"sqlite writer: {type(exc).__name__}: {exc}")


_SCAN_BATCH = 2000  # rows per scan_stored callback


@dataclass(slots=True)
class _Job:
    run_id: str
    entries: Sequence[NewEvent]
    expected_seq: int | None
    future: asyncio.Future[Sequence[Event]]


def _connect(path: str, *, readonly: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    if readonly:
        conn.execute("PRAGMA query_only = 1")
    else:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
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


def _row(conn: sqlite3.Connection, key: RowKey) -> Row | None:
    got = conn.execute(select_sql(TABLES[key.table], "?"), key.key).fetchone()
    return None if got is None else dict(json.loads(got[0]))


def _list(conn: sqlite3.Connection, table: str, run_id: str) -> list[Row]:
    sql = list_sql(TABLES[table], "?")
    return [json.loads(r[0]) for r in conn.execute(sql, (run_id,))]


class _Pending:
    """One batch's appends as planned, written at its end with one statement per kind.

    ``heads`` starts as the batch's heads read in one query; each planned append moves its
    run's head there and leaves its projection rows in ``rows``, so a later append of the same
    batch reads them as a read in the transaction would (the rows decoded from stored text).
    """

    def __init__(self, heads: dict[str, Head]) -> None:
        self.heads = heads
        self.events: list[tuple[str, int, str, str, str, str, bytes]] = []
        self.moved: dict[str, Head] = {}
        self.new_runs: set[str] = set()
        self.rows: dict[RowKey, tuple[object, ...]] = {}

    def row(self, conn: sqlite3.Connection, key: RowKey) -> Row | None:
        planned = self.rows.get(key)
        if planned is None:
            return _row(conn, key)
        return dict(json.loads(str(planned[-1])))

    def add(self, plan: AppendPlan) -> None:
        self.events.extend(
            (r.run_id, r.seq, r.type, r.at, r.prev_hash, r.hash, r.data) for r in plan.rows
        )
        self.heads[plan.run_id] = self.moved[plan.run_id] = plan.head
        if plan.new_run:
            self.new_runs.add(plan.run_id)
        for key, row in plan.writes.items():
            self.rows[key] = upsert_params(key, row)

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


class SQLiteStore(TypedReads, SQLiteConversations):
    def __init__(
        self,
        path: str | Path,
        *,
        key: LedgerKey,
        clock: Clock = system_clock,
        in_flight: InFlightCalls = NOTHING_IN_FLIGHT,
        readers: int = 4,
    ) -> None:
        self.path = str(path)
        self._run_locks = FileRunLocks(Path(self.path + ".locks"))
        self.key = key
        self._clock = clock
        self._in_flight = in_flight
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="charter-read")
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick = asyncio.Event()
        self._closed = False
        self.commits = 0
        """Transactions the writer committed (group commit makes this < appends)."""

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, path: str | Path, **options: Any) -> AsyncIterator[SQLiteStore]:
        store = cls(path, **options)
        await store.start()
        try:
            yield store
        finally:
            await store.aclose()

    async def start(self) -> None:
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"sqlite: cannot create the directory for {self.path}: {exc.strerror}"
                ) from None
        self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._writer = threading.Thread(
            target=self._writer_main, args=(ready,), name="charter-sqlite-writer", daemon=True
        )
        self._writer.start()
        await ready

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._queue.put(_STOP)
            await asyncio.to_thread(self._writer.join)
        self._close_conversations()
        self._readers.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()

    # -- the writer thread ----------------------------------------------------------------

    def _writer_main(self, ready: asyncio.Future[None]) -> None:
        loop = self._loop
        assert loop is not None
        try:
            conn = _connect(self.path, readonly=False)
            migrate(conn, where=self.path)
        except (sqlite3.Error, CharterError) as exc:
            err = translate_sqlite_error(exc) if isinstance(exc, sqlite3.Error) else exc
            loop.call_soon_threadsafe(_settle_ready, ready, err)
            return
        loop.call_soon_threadsafe(_settle_ready, ready, None)
        try:
            stop = False
            while not stop:
                first = self._queue.get()
                if first is _STOP:
                    break
                batch: list[_Job] = [first]
                while len(batch) < _MAX_BATCH:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is _STOP:
                        stop = True
                        break
                    batch.append(nxt)
                outcomes = self._commit(conn, batch)
                loop.call_soon_threadsafe(self._settle, outcomes)
        finally:
            conn.close()

    def _commit(
        self, conn: sqlite3.Connection, batch: list[_Job]
    ) -> list[tuple[_Job, Sequence[Event] | None, BaseException | None]]:
        try:
            conn.execute("BEGIN IMMEDIATE")
            pending = _Pending(_heads(conn, {job.run_id for job in batch}))
            # One timestamp for the transaction: its appends become durable together.
            now = format_at(self._clock())
            outcomes: list[tuple[_Job, Sequence[Event] | None, BaseException | None]] = []
            for job in batch:
                try:
                    plan = self._plan(conn, job, pending, now)
                except CharterError as exc:  # refused before writing anything
                    outcomes.append((job, None, exc))
                    continue
                pending.add(plan)
                outcomes.append((job, plan.events, None))
            pending.write(conn)
            conn.execute("COMMIT")
            self.commits += 1
            return outcomes
        except Exception as exc:  # the writer thread must survive anything a batch raises
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if len(batch) == 1:
                return [(batch[0], None, _as_store_error(exc))]
            # Retry each append alone so one bad append does not fail its neighbours.
            return [o for job in batch for o in self._commit(conn, [job])]

    def _plan(self, conn: sqlite3.Connection, job: _Job, pending: _Pending, now: str) -> AppendPlan:
        rows = {k: pending.row(conn, k) for k in rows_needed(job.run_id, job.entries)}
        return plan_append(
            run_id=job.run_id,
            head=pending.heads.get(job.run_id),
            entries=job.entries,
            rows=rows,
            now=now,
            key=self.key,
            expected_seq=job.expected_seq,
        )

    def _settle(
        self, outcomes: list[tuple[_Job, Sequence[Event] | None, BaseException | None]]
    ) -> None:
        for job, events, exc in outcomes:
            if job.future.done():
                continue
            if exc is not None:
                job.future.set_exception(exc)
            else:
                assert events is not None
                job.future.set_result(events)
        self._tick.set()
        self._tick = asyncio.Event()

    # -- EventLog -------------------------------------------------------------------------

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        if self._closed or self._loop is None:
            raise StoreError("the store is closed", reason="STORE_CLOSED")
        await check_in_flight(self._in_flight, run_id, entries)
        future: asyncio.Future[Sequence[Event]] = self._loop.create_future()
        self._queue.put(_Job(run_id, list(entries), expected_seq, future))
        return await future

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._with_reader, fn)

    def _with_reader(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        try:
            if conn is None:
                conn = _connect(self.path, readonly=True)
                self._local.conn = conn
                with self._conns_lock:
                    self._reader_conns.append(conn)
            return fn(conn)
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc) from None

    async def schema_versions(self) -> tuple[int, int]:
        sql = f"SELECT coalesce(max(version), 0) FROM {migrations.SCHEMA_TABLE}"
        found = await self._read(lambda c: int(c.execute(sql).fetchone()[0]))
        return found, len(migrations.SQLITE)

    async def head(self, run_id: str) -> Head | None:
        return await self._read(lambda c: _head(c, run_id))

    async def read_stored(
        self, run_id: str, *, after: int = 0, limit: int = 1000
    ) -> Sequence[StoredEvent]:
        def go(conn: sqlite3.Connection) -> list[StoredEvent]:
            cur = conn.execute(
                "SELECT seq, type, at, prev_hash, hash, data FROM events "
                "WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, after, limit),
            )
            return [
                StoredEvent(run_id=run_id, seq=s, type=t, at=a, prev_hash=p, hash=h, data=bytes(d))
                for s, t, a, p, h, d in cur
            ]

        return await self._read(go)

    async def scan_stored(
        self,
        run_id: str,
        *,
        upto: int,
        visit: Callable[[list[tuple[int, str, str, str, str, bytes]]], None],
    ) -> None:
        """Feed the ``(seq, type, at, prev_hash, hash, data)`` tuples of rows ``seq <= upto``,
        in order and in batches, to ``visit`` on one reader thread (verification's fast path:
        no row objects, no hops, no call per row)."""

        def go(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "SELECT seq, type, at, prev_hash, hash, data FROM events "
                "WHERE run_id = ? AND seq <= ? ORDER BY seq",
                (run_id, upto),
            )
            while batch := cur.fetchmany(_SCAN_BATCH):
                visit(batch)  # BLOB columns arrive as bytes

        await self._read(go)

    async def wait_for_events(self, run_id: str, *, after: int, timeout: float) -> bool:
        tick = self._tick
        head = await self.head(run_id)
        if head is not None and head.seq > after:
            return True
        with contextlib.suppress(TimeoutError):
            # Appends by other processes are seen when the timeout expires (polling).
            await asyncio.wait_for(tick.wait(), timeout)
        head = await self.head(run_id)
        return head is not None and head.seq > after

    def run_lock(self, run_id: str) -> AbstractAsyncContextManager[None]:
        """Serializes write tools of one run across every process sharing this file."""
        return self._run_locks.hold(run_id)

    # -- ProjectionReader -----------------------------------------------------------------

    async def get_row(self, key: RowKey) -> Row | None:
        return await self._read(lambda c: _row(c, key))

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]:
        return await self._read(lambda c: _list(c, table, run_id))

    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        columns = tuple(where)
        sql = query_sql(TABLES[table], columns, "?")
        params = (*where.values(), limit)
        return await self._read(lambda c: [json.loads(r[0]) for r in c.execute(sql, params)])

    async def list_runs(
        self, *, limit: int = 100, tenant: str | None = None
    ) -> Sequence[RunSummary]:
        where, params = (
            ("WHERE r.tenant = ? ", (tenant, limit)) if tenant is not None else ("", (limit,))
        )

        def go(conn: sqlite3.Connection) -> list[RunSummary]:
            cur = conn.execute(
                "SELECT r.data, coalesce(h.seq, 0) FROM runs r "
                "LEFT JOIN run_heads h ON h.run_id = r.run_id "
                f"{where}ORDER BY r.created_at DESC, r.run_id DESC LIMIT ?",
                params,
            )
            return [RunSummary(run=json.loads(d), event_count=n) for d, n in cur]

        return await self._read(go)

    async def snapshot(self, run_id: str) -> RunSnapshot | None:
        def go(conn: sqlite3.Connection) -> RunSnapshot | None:
            conn.execute("BEGIN")
            try:
                head = _head(conn, run_id)
                if head is None:
                    return None
                return RunSnapshot(
                    head=head,
                    run=_row(conn, run_key(run_id)),
                    tables={t: _list(conn, t, run_id) for t in RUN_TABLES},
                )
            finally:
                conn.execute("COMMIT")

        return await self._read(go)

    async def stored_snapshot(self, run_id: str) -> StoredSnapshot | None:
        def go(conn: sqlite3.Connection) -> StoredSnapshot | None:
            conn.execute("BEGIN")
            try:
                head = _head(conn, run_id)
                if head is None:
                    return None
                key = run_key(run_id)
                run = conn.execute(select_sql(TABLES[key.table], "?"), key.key).fetchone()
                return StoredSnapshot(
                    head=head,
                    run=None if run is None else _text_bytes(run[0]),
                    tables={
                        t: [
                            _text_bytes(r[0])
                            for r in conn.execute(list_sql(TABLES[t], "?"), (run_id,))
                        ]
                        for t in RUN_TABLES
                    },
                )
            finally:
                conn.execute("COMMIT")

        return await self._read(go)


def _text_bytes(value: object) -> bytes:
    """A projection row's stored ``data`` as bytes: TEXT as written, or whatever else a damaged
    row holds (a BLOB as it is, a number as its text), for verification to compare."""
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def _settle_ready(ready: asyncio.Future[None], exc: BaseException | None) -> None:
    if ready.done():
        return
    if exc is None:
        ready.set_result(None)
    else:
        ready.set_exception(exc)


__all__ = ["MigrationError", "SQLiteStore", "migrate", "translate_sqlite_error"]
