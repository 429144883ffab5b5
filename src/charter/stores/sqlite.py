"""The SQLite store: the embedded default.

One dedicated writer thread owns the only writing connection (WAL, ``synchronous=FULL``) and
**group-commits**: appends queued while a commit is in progress all go into the next single
transaction, and each append's future resolves only after that transaction committed. The
batch reads its heads in one query and writes its event rows, projection rows and heads with
one statement per kind. An append whose plan is refused (a bad transition, a stale
``expected_seq``) fails alone, before it writes anything; a database error rolls the batch back
and retries its appends one by one, so one failure never takes its neighbours with it.

While the process runs at most one call (the ``inline`` probe the runtime wires in says so)
and the writer is idle, an append commits on the event loop's own thread instead: the same
code under the same lock, without the two thread hand-offs (queue, wake-up, the loop's
self-pipe) that a lone caller otherwise pays twice per call. It blocks the loop for one
commit; when most of the recent inline commits took over ``_INLINE_MAX_S`` (a slow disk) this
is off for a while, and as soon as calls overlap the writer thread group-commits again.

Readers use their own connections on a small thread pool. Every ``sqlite3`` exception is
translated into the :class:`~charter.errors.StoreError` family at this boundary. The event
loop that opened the store is the one its futures resolve on (asyncio).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from charter.errors import CharterError, MigrationError, StoreError
from charter.ledger.append import (
    AppendPlan,
    check_in_flight,
    guarded,
    plan_append,
    rows_needed,
)
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
    query_sql,
    read_columns,
    read_width,
    seal_params,
    seal_sql,
    select_sql,
    unencodable_key,
)
from charter.stores.builds import SQLiteBuilds
from charter.stores.flags import (
    ALL_FLAGS,
    INSERT_FINDING_SQLITE,
    UPSERT_QUARANTINE,
    checking_key,
    flag_problem,
    flag_problems,
    listed_count,
    listed_flags,
    listed_problem,
    quarantine_row,
)
from charter.stores.leases import SQLiteLeases
from charter.stores.locks import FileRunLocks
from charter.stores.sqlite_batch import (
    HotRows,
    _begin_now,
    _connect,
    _head,
    _heads,
    _list,
    _Pending,
    _row,
    migrate,
    stored_blob,
)
from charter.stores.sqlite_conversations import SQLiteConversations
from charter.stores.sqlite_edits import edits_first
from charter.stores.sqlite_errors import (
    as_store_error,
    is_corruption,
    is_storage_failure,
    is_undecodable,
    lenient_text,
    stopped_writing,
    translate_sqlite_error,
    write_transaction,
)
from charter.stores.sqlite_files import FileReplaced, NewDatabase, OpenedFiles, create_database
from charter.stores.sqlite_listing import rowless_runs, stored_table, text_bytes
from charter.stores.vanished import VANISHED_SQL, run_ids, vanished_params

T = TypeVar("T")
logger = logging.getLogger(__name__)
_MAX_BATCH = 1024
_STOP = object()
_INLINE_MAX_S = 0.004  # an inline commit slower than this held the loop too long;
_INLINE_WINDOW = 8  # when, of the last this many inline commits,
_INLINE_SLOW = 5  # at least this many were slow (a slow disk, not one WAL checkpoint or the
_INLINE_PAUSE_S = 5.0  # first commits of a new file), appends use the writer thread this long


_SCAN_BATCH = 500  # rows per scan_stored callback (a batch stays in the CPU's caches)
_TRUST_ATTEMPTS = 4  # appends tried again after verifying what another process appended
# A listed run: its row as RowOpener reads it, then its head and its ledger flags.
_RUN_COLUMNS = read_columns(TABLES["runs"], "r.")
_RUN_WIDTH = read_width(TABLES["runs"])
_RUN_KEYED = 3 + len(TABLES["runs"].keys)  # where a run row's indexed columns start


@dataclass(slots=True)
class _Job:
    run_id: str
    entries: Sequence[NewEvent]
    expected_seq: int | None
    future: asyncio.Future[Sequence[Event]]


class SQLiteStore(TypedReads, SQLiteConversations, SQLiteLeases, SQLiteBuilds):
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
        self.files = OpenedFiles(self.path)  # checked before each COMMIT (sqlite_files)
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
        self._write_lock = threading.Lock()  # whoever commits holds it: writer thread or loop
        self._conn: sqlite3.Connection | None = None  # the writing connection while open
        self.inline: Callable[[], bool] | None = None
        """Answers True while an idle writer's append may commit on the loop's thread (the
        runtime: at most one call runs in this process). None: always the writer thread."""
        self._inline_paused_until = 0.0
        self._inline_slow: collections.deque[bool] = collections.deque(maxlen=_INLINE_WINDOW)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick: asyncio.Event | None = None  # made by the first waiter
        self._closed = False
        self.failure: str | None = None
        """Why the store stopped accepting writes (fail-stop), or None."""
        self.failure_reason = "STORE_FAILED"  # STORE_CORRUPT: the file itself is damaged
        self.trust = LedgerTrust(key)
        self._background: set[asyncio.Task[None]] = set()
        """What this process verified of each run, and the runs it refuses."""
        self._opener = RowOpener(self.trust)
        self._hot = HotRows(self.trust)  # the writer thread's rows (sqlite_batch.HotRows)
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
        made: NewDatabase | None = None  # removed again if it cannot be made (sqlite_files)
        if self.path != ":memory:":
            try:
                made = create_database(self.path)
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
        try:
            await ready
        except StoreError as exc:
            # a full disk only: another process may be using the file (this open timed out)
            if made is not None and exc.reason == "STORE_DISK_FULL":
                made.remove()
            raise
        for problem in await self.run_flags():
            if problem.marked:  # a quarantine mark, or one forged or lifted: refused
                self.trust.quarantine(problem)
        self.trust.on_invalid(self._on_invalid)

    async def aclose(self) -> None:
        if self._closed:
            return
        await asyncio.sleep(0)  # a finding a worker thread handed over starts first
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
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
        conn: sqlite3.Connection | None = None
        try:
            conn = _connect(self.path, readonly=False)
            migrate(conn, where=self.path)
            self._hot.edits.start(conn)
            self.files.record()
        except (sqlite3.Error, CharterError) as exc:
            if conn is not None:
                conn.close()  # before start() removes a database it could not make
            err = (
                translate_sqlite_error(exc, opening=str(self.path))
                if isinstance(exc, sqlite3.Error)
                else exc
            )
            loop.call_soon_threadsafe(_settle_ready, ready, err)
            return
        self._conn = conn
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
                with self._write_lock:
                    outcomes = self._commit(conn, batch)
                loop.call_soon_threadsafe(self._settle, outcomes)
        finally:
            with self._write_lock:
                self._conn = None
                conn.close()

    def _commit_inline(self, job: _Job) -> bool:
        """Commit ``job`` now, on the loop's thread, when nothing else is writing or queued
        and the ``inline`` probe allows it; settle its future. False: queue it instead."""
        probe, conn = self.inline, self._conn
        if probe is None or conn is None or not self._queue.empty():
            return False
        if time.monotonic() < self._inline_paused_until or not probe():
            return False
        if not self._write_lock.acquire(blocking=False):  # the writer thread is committing
            return False
        try:
            if self._conn is not conn or self.failure is not None:  # closed, or fail-stop
                return False
            started = time.monotonic()
            if not _begin_now(conn):  # another process writes: wait on the writer thread
                return False
            outcomes = self._commit(conn, [job], begun=True)
            took = time.monotonic() - started
        finally:
            self._write_lock.release()
        # A majority of slow commits among the recent ones: one slow commit (a WAL checkpoint,
        # the first commits of a new file) is not a slow disk. A moving average was tipped by
        # one 25 ms commit and kept a fresh `charter mcp` off inline commits for its first 5 s.
        slow = self._inline_slow
        slow.append(took > _INLINE_MAX_S)
        if slow.count(True) >= _INLINE_SLOW:
            self._inline_paused_until = started + took + _INLINE_PAUSE_S
            slow.clear()
        self._settle(outcomes)
        return True

    def _commit(
        self, conn: sqlite3.Connection, batch: list[_Job], *, begun: bool = False
    ) -> list[tuple[_Job, Sequence[Event] | None, BaseException | None]]:
        """Write ``batch`` in one transaction (``begun``: the caller already opened it)."""
        if self.failure is not None:  # fail-stop: nothing more is written
            return [(job, None, self._refusal()) for job in batch]
        committing = False
        try:
            if not begun:
                conn.execute("BEGIN IMMEDIATE")
            trust = self.trust
            hot = self._hot if trust.enabled else None
            if hot is not None and (edited := hot.check(conn)):
                trust.forget(edited)  # events edited by hand: those runs are verified again
            run_ids = {job.run_id for job in batch}
            pending = _Pending(
                _heads(conn, run_ids) if hot is None else hot.read_heads(conn, run_ids),
                self._opener,
                self.key if trust.enabled else None,
                hot,
                head_key=self.key,
            )
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
            self.files.check()  # the file deleted or replaced under us: fail-stop
            committing = True
            conn.execute("COMMIT")
            self.commits += 1
            for head in pending.moved.values():
                trust.advance(head)
            trust.wrote(pending.seqs)
            if hot is not None:
                hot.committed(pending)
            return outcomes
        except Exception as exc:  # the writer thread must survive anything a batch raises
            self._hot.clear()
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if is_storage_failure(exc):
                return [(job, None, self._fail_stop(exc, committing)) for job in batch]
            if len(batch) == 1:
                return [(batch[0], None, as_store_error(exc))]
            # Retry each append alone so one bad append does not fail its neighbours.
            return [o for job in batch for o in self._commit(conn, [job])]

    def _plan(self, conn: sqlite3.Connection, job: _Job, pending: _Pending, now: str) -> AppendPlan:
        if job.run_id not in pending.moved:  # the first append of the run in this batch
            self.trust.check_head(job.run_id, pending.heads.get(job.run_id))
        rows = {k: pending.row(conn, k) for k in rows_needed(job.run_id, job.entries)}
        return plan_append(
            run_id=job.run_id,
            head=pending.heads.get(job.run_id),
            entries=job.entries,
            rows=rows,
            now=now,
            key=self.key,
            expected_seq=job.expected_seq,
            seal_head=False,  # _Pending.write seals the batch's last head of each run
            proven=pending.proven,  # the payloads' nested values, for the rows built of them
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
        tick = self._tick
        if tick is not None:  # someone waits for appends: wake them (a new waiter makes anew)
            self._tick = None
            tick.set()

    # -- fail-stop -----------------------------------------------------------------------

    def _fail_stop(self, exc: BaseException, committing: bool) -> StoreError:
        """A write or fsync failed: from now on nothing is written (after a failed fsync the
        page cache cannot be trusted); only reopening the store clears it. Returns the error
        of the batch that hit it: ``STORE_IO_ERROR`` when the COMMIT failed (its appends may
        or may not be durable), else ``STORE_FAILED`` (rolled back, not written)."""
        cause = f"{type(exc).__name__}: {exc}"
        if self.failure is None:
            self.failure = cause
            self.failure_reason = "STORE_CORRUPT" if is_corruption(exc) else "STORE_FAILED"
            logger.critical(
                "SQLite store %s stopped accepting writes after a storage error (%s); "
                "reopen the store (restart the process) once the disk is healthy",
                self.path,
                cause,
            )
        if committing:
            return StoreError(
                f"the store failed while committing ({cause}); this write may or may not "
                "be durable, and the store accepts no more writes",
                reason="STORE_IO_ERROR",
                details={"durable": "unknown"},
            )
        return self._refusal()

    def _refusal(self) -> StoreError:
        return stopped_writing(str(self.path), self.failure or "", self.failure_reason)

    # -- run-time trust ------------------------------------------------------------------

    def _write_now(self, fn: Callable[[sqlite3.Connection], object]) -> None:
        """One short write transaction on a connection of its own (rare writes outside
        appends: sealing old rows, run flags); SQLite serializes it with the writer."""
        if self.failure is not None:
            raise self._refusal()
        try:
            self.files.check()  # before connecting, which would make a deleted file anew
        except FileReplaced as exc:
            raise self._fail_stop(exc, False) from None
        conn = _connect(self.path, readonly=False)
        try:
            write_transaction(conn, fn, self._fail_stop, self.files.check)
        finally:
            conn.close()

    async def seal_rows(self, run_id: str, seq: int, rows: dict[RowKey, Row]) -> None:
        """Give the run's rows that have no MAC yet (written before rows carried one) their
        MAC, where they still hold the text of ``rows`` (rebuilt from verified events)."""

        def unsealed(conn: sqlite3.Connection) -> bool:
            return any(
                conn.execute(
                    f"SELECT 1 FROM {t} WHERE run_id = ? AND row_mac IS NULL LIMIT 1", (run_id,)
                ).fetchone()
                for t in ("runs", *RUN_TABLES)
            )

        if not self.trust.enabled or not await self._read(unsealed):
            return
        params = seal_params(rows, run_id, seq, self.key)

        def seal(conn: sqlite3.Connection) -> None:
            for table, batch in params.items():
                conn.executemany(seal_sql(TABLES[table], "?"), batch)

        await asyncio.to_thread(self._write_now, seal)
        logger.info("sealed the projection rows of run %s (verified up to %d)", run_id, seq)

    def _on_invalid(self, problem: RunProblem) -> None:
        """Trust listener (any thread, maybe inside the writer's transaction): record the
        finding from the event loop, in a worker thread, once the writer lets go."""
        loop = self._loop
        if problem.quarantined or self._closed or loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # found on the loop itself: start now, so aclose() waits for it
            self._spawn_finding(problem)
        else:
            loop.call_soon_threadsafe(self._spawn_finding, problem)

    def _spawn_finding(self, problem: RunProblem) -> None:
        if self._closed:
            return
        task = asyncio.ensure_future(asyncio.to_thread(self._record_finding, problem))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _record_finding(self, problem: RunProblem) -> None:
        """Keep the finding in run_ledger_flags (best effort: the refusal stands anyway)."""
        values = (
            problem.run_id,
            problem.reason,
            problem.seq,
            problem.message,
            format_at(self._clock()),
            problem.run_id,
        )
        try:
            self._write_now(lambda c: c.execute(INSERT_FINDING_SQLITE, values))
        except StoreError as exc:
            logger.error("could not record the finding on run %s: %s", problem.run_id, exc)

    async def quarantine(self, run_id: str, *, by: str, reason: str) -> RunProblem:
        """Mark ``run_id`` quarantined: every process refuses it (a running one from its next
        append or read of it: charter.stores.flags)."""
        found, now = self.trust.problem(run_id), format_at(self._clock())
        values, problem = quarantine_row(self.key, run_id, found, by=by, reason=reason, now=now)
        sql = UPSERT_QUARANTINE.format(p="?")
        await asyncio.to_thread(self._write_now, lambda c: c.execute(sql, values))
        self.trust.quarantine(problem)
        return problem

    async def run_flags(self) -> list[RunProblem]:
        """Every flagged run (found damaged by some process, or quarantined)."""
        key = checking_key(self.trust)
        return await self._read(lambda c: flag_problems(c.execute(ALL_FLAGS), key))

    async def vanished(self, table: str, key: str) -> list[str]:
        """Runs that held a ``table`` row of id ``key`` deleted outside Charter."""
        sql, params = VANISHED_SQL.format(p="?"), vanished_params(table, key)
        return await self._read(lambda c: run_ids(c.execute(sql, params).fetchall()))

    # -- EventLog -------------------------------------------------------------------------

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        if self._closed or self._loop is None:
            raise StoreError("the store is closed", reason="STORE_CLOSED")
        if self.failure is not None:
            raise self._refusal()
        if guarded(entries):
            await check_in_flight(self._in_flight, run_id, entries)
        trust = self.trust
        # A run this process verified (or created) and does not refuse needs no verification
        # round (no coroutine of trust.ensure per append).
        if (trust.verified(run_id) is None or trust.problem(run_id) is not None) and not (
            entries and entries[0].type == "run_created"
        ):
            await trust.ensure(self, run_id)
        loop = self._loop
        last: RowUnsealed | None = None
        for _ in range(_TRUST_ATTEMPTS):
            future: asyncio.Future[Sequence[Event]] = loop.create_future()
            job = _Job(run_id, list(entries), expected_seq, future)
            if not self._commit_inline(job):
                self._queue.put(job)
            try:
                return await future
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

    # The kernel may start this append in the caller's task (charter.kernel.flight.in_place):
    # nothing in it is bound to the current task (asyncio locks and futures only).
    append_in_place = append

    async def _read_checked(self, fn: Callable[[sqlite3.Connection], T], run: str = "") -> T:
        """:meth:`_read` of projection rows: a row of a run this process has not verified
        (up to the row) sends that run through verification first, then the read again; so
        does an edit of ``run``'s events noticed by the read (:mod:`.sqlite_edits`)."""
        fn = edits_first(fn, run, self._hot.edits, self.trust) if run else fn
        for _ in range(_TRUST_ATTEMPTS):
            try:
                return await self._read(fn)
            except RowUnsealed as exc:
                await self.trust.refresh(self, exc.run_id)
        try:
            return await self._read(fn)
        except RowUnsealed as exc:  # still past the verified head: refuse the run
            raise self.trust.past_head(exc.run_id) from None

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
            try:
                return fn(conn)
            except sqlite3.OperationalError as exc:
                if not is_undecodable(exc):
                    raise
            with lenient_text(conn):  # hand-edited TEXT that is not UTF-8: read it, report it
                return fn(conn)
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc, path=str(self.path)) from None
        except UnicodeEncodeError:  # a caller's id with a lone surrogate
            raise unencodable_key() from None

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
                StoredEvent(
                    run_id=run_id,
                    seq=s,
                    type=t,
                    at=a,
                    prev_hash=p,
                    hash=h,
                    data=stored_blob(run_id, s, d),
                )
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

        sql = "SELECT seq, type, at, prev_hash, hash, data FROM events WHERE run_id = ? AND "
        fed: list[Any] = []  # a re-read after text that is not UTF-8 goes on after what was fed

        def go(conn: sqlite3.Connection) -> None:
            after = "seq > ? AND " if fed else ""
            cur = conn.execute(f"{sql}{after}seq <= ? ORDER BY seq", (run_id, *fed[-1:], upto))
            while batch := cur.fetchmany(_SCAN_BATCH):
                visit(batch)  # BLOB columns arrive as bytes
                fed.append(batch[-1][0])

        await self._read(go)

    async def wait_for_events(self, run_id: str, *, after: int, timeout: float) -> bool:
        tick = self._tick
        if tick is None:
            tick = self._tick = asyncio.Event()
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
        await self.trust.ensure(self, key.key[0])
        return await self._read_checked(lambda c: _row(c, key, self._opener), key.key[0])

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]:
        await self.trust.ensure(self, run_id)
        return await self._read_checked(lambda c: _list(c, table, run_id, self._opener), run_id)

    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        columns = tuple(where)
        sql = query_sql(TABLES[table], columns, "?")
        params = (*where.values(), limit)
        listing, opener, run = LISTING_COLUMNS.issuperset(columns), self._opener, ""
        if isinstance(where.get("run_id"), str):  # one run's rows: checked as list_rows does
            run = where["run_id"]
            await self.trust.ensure(self, run)
        return await self._read_checked(
            lambda c: opener.many(table, c.execute(sql, params).fetchall(), listing=listing), run
        )

    async def list_runs(
        self, *, limit: int = 100, tenant: str | None = None
    ) -> Sequence[RunSummary]:
        where, params = (
            ("WHERE r.tenant = ? ", (tenant, limit)) if tenant is not None else ("", (limit,))
        )

        def go(conn: sqlite3.Connection) -> list[RunSummary]:
            cur = conn.execute(
                f"SELECT {_RUN_COLUMNS}, h.seq, "
                + listed_flags("r.run_id")
                + " FROM runs r LEFT JOIN run_heads h ON h.run_id = r.run_id "
                "LEFT JOIN run_ledger_flags f ON f.run_id = r.run_id "
                f"{where}ORDER BY r.created_at DESC, r.run_id DESC LIMIT ?",
                params,
            )
            listed = [self._summary(got) for got in cur]
            return (rowless_runs(conn, tenant, checking_key(self.trust)) + listed)[:limit]

        return await self._read(go)

    def _summary(self, got: Sequence[Any]) -> RunSummary:
        """A run listed with its ledger state: a run row that fails its MAC is not served
        (only its id), and a refused or quarantined run says so."""
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
        def go(conn: sqlite3.Connection) -> RunSnapshot | None:
            conn.execute("BEGIN")
            try:
                head = _head(conn, run_id)
                if head is None:
                    return None
                return RunSnapshot(
                    head=head,
                    run=_row(conn, run_key(run_id), self._opener),
                    tables={t: _list(conn, t, run_id, self._opener) for t in RUN_TABLES},
                )
            finally:
                conn.execute("COMMIT")

        await self.trust.ensure(self, run_id)
        return await self._read_checked(go, run_id)

    async def stored_snapshot(self, run_id: str) -> StoredSnapshot | None:
        def go(conn: sqlite3.Connection) -> StoredSnapshot | None:
            conn.execute("BEGIN")
            try:
                head = _head(conn, run_id)
                if head is None:
                    return None
                key = run_key(run_id)
                run = conn.execute(select_sql(TABLES[key.table], "?"), key.key).fetchone()
                listed = {t: stored_table(conn, TABLES[t], run_id) for t in RUN_TABLES}
                return StoredSnapshot(
                    head=head,
                    run=None if run is None else text_bytes(run[0]),
                    tables={t: rows for t, (rows, _) in listed.items()},
                    columns={
                        "runs": [] if run is None else [run[_RUN_KEYED:]],
                        **{t: columns for t, (_, columns) in listed.items()},
                    },
                )
            finally:
                conn.execute("COMMIT")

        return await self._read(go)


def _settle_ready(ready: asyncio.Future[None], exc: BaseException | None) -> None:
    if ready.done():
        return
    if exc is None:
        ready.set_result(None)
    else:
        ready.set_exception(exc)


__all__ = ["MigrationError", "SQLiteStore", "migrate", "translate_sqlite_error"]
