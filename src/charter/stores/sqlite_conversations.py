"""The conversation-storage port on SQLite (mixed into :class:`~charter.stores.sqlite.SQLiteStore`).

Conversation writes do **not** go through the ledger's writer thread. They use a connection
of their own on one dedicated thread, each write a short ``BEGIN IMMEDIATE … COMMIT`` with
``synchronous = NORMAL``:

* the ledger's group commit stays exactly as it is — no second kind of job in its queue, no
  conversation row in its batches, so a chat write can never fail or roll back a ledger batch,
  and the writer thread spends no fsync on chat traffic;
* a chat commit holds SQLite's write lock only for a few small inserts and **no fsync**
  (``NORMAL`` in WAL mode syncs at checkpoints; the ledger writer's next ``FULL`` commit syncs
  the WAL, chat frames included), so the ledger writer rarely waits on it, and when it does
  its ``busy_timeout`` covers the wait. The price: a chat event committed just before a power
  loss (not a process crash) can be lost — stream events are a convenience copy; the ledger
  stays the record.

Reads use the store's reader pool. ``sqlite3`` errors are translated at this boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from charter.errors import StoreConflict, StoreError
from charter.ledger.chain import LedgerKey
from charter.stores import conversations as sql
from charter.stores.conversations import ConversationEvent, ConversationRecord
from charter.stores.sqlite_errors import translate_sqlite_error
from charter.stores.sqlite_files import FileReplaced, OpenedFiles

T = TypeVar("T")
_CHECKPOINT_PAGES = 4000  # as the ledger writer's (charter.stores.sqlite)


def _translate(exc: sqlite3.Error) -> StoreError:
    return translate_sqlite_error(exc)


def _connect_chat_writer(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
    return conn


class SQLiteConversations:
    """Conversation rows: writes on a dedicated connection and thread, reads on the pool."""

    path: str
    key: LedgerKey
    files: OpenedFiles
    _closed: bool

    if TYPE_CHECKING:

        def _fail_stop(self, exc: BaseException, committing: bool) -> StoreError: ...

        async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    def _chat_executor(self) -> ThreadPoolExecutor:
        executor: ThreadPoolExecutor | None = self.__dict__.get("_chat_executor_")
        if executor is None:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="charter-chat-write")
            self.__dict__["_chat_executor_"] = executor
        return executor

    async def _chat_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreError("the store is closed", reason="STORE_CLOSED")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._chat_executor(), self._chat_transaction, fn)

    def _chat_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one immediate transaction (on the chat writer thread only)."""
        conn: sqlite3.Connection | None = self.__dict__.get("_chat_conn_")
        try:
            if conn is None:
                self.files.check()  # connecting would make a deleted database anew
                conn = self.__dict__["_chat_conn_"] = _connect_chat_writer(self.path)
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                self.files.check()  # the files deleted or replaced under us: fail-stop
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            return result
        except FileReplaced as exc:
            raise self._fail_stop(exc, False) from None
        except sqlite3.Error as exc:
            raise _translate(exc) from None

    def _close_conversations(self) -> None:
        """Stop the chat writer thread and close its connection (called by ``aclose``)."""
        executor: ThreadPoolExecutor | None = self.__dict__.pop("_chat_executor_", None)
        if executor is not None:
            executor.shutdown(wait=True)
        conn: sqlite3.Connection | None = self.__dict__.pop("_chat_conn_", None)
        if conn is not None:
            conn.close()

    # -- ConversationStore ------------------------------------------------------------------

    async def save_conversation(self, record: ConversationRecord) -> None:
        params = sql.save_params(record, self.key)
        await self._chat_write(lambda c: c.execute(sql.save_sql("?"), params))

    async def claim_turn(self, record: ConversationRecord) -> bool:
        params = sql.save_params(record, self.key)
        changed = await self._chat_write(lambda c: c.execute(sql.claim_sql("?"), params).rowcount)
        return bool(changed)

    async def load_conversation(self, conversation_id: str) -> ConversationRecord | None:
        def go(conn: sqlite3.Connection) -> ConversationRecord | None:
            row = conn.execute(sql.load_sql("?"), (conversation_id,)).fetchone()
            return None if row is None else sql.as_record(row, self.key)

        return await self._read(go)

    async def append_conversation_events(
        self, conversation_id: str, events: Sequence[ConversationEvent], *, updated_at: str
    ) -> None:
        rows = [(conversation_id, e.sequence, e.type, e.data) for e in events]

        def go(conn: sqlite3.Connection) -> None:
            conn.executemany(sql.insert_events_sql("?"), rows)
            conn.execute(sql.touch_updated_sql("?"), (updated_at, conversation_id))

        try:
            await self._chat_write(go)
        except StoreConflict:
            raise sql.sequence_conflict(conversation_id) from None

    async def read_conversation_events(
        self, conversation_id: str, *, after: int, limit: int = 500
    ) -> Sequence[ConversationEvent]:
        params = (conversation_id, after, limit)
        return await self._read(
            lambda c: [sql.as_event(r) for r in c.execute(sql.read_events_sql("?"), params)]
        )

    async def conversation_tail(self, conversation_id: str) -> ConversationEvent | None:
        def go(conn: sqlite3.Connection) -> ConversationEvent | None:
            row = conn.execute(sql.tail_sql("?"), (conversation_id,)).fetchone()
            return None if row is None else sql.as_event(row)

        return await self._read(go)

    async def touch_conversation(self, conversation_id: str, *, watched_at: str) -> None:
        params = (watched_at, conversation_id)
        await self._chat_write(lambda c: c.execute(sql.touch_watched_sql("?"), params))

    async def delete_idle_conversations(self, *, before: str) -> int:
        def go(conn: sqlite3.Connection) -> int:
            conn.execute(sql.delete_events_sql("?"), (before,))
            return conn.execute(sql.delete_records_sql("?"), (before,)).rowcount

        return await self._chat_write(go)
