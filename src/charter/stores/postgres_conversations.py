"""The conversation-storage port on PostgreSQL (mixed into
:class:`~charter.stores.postgres.PostgresStore`).

Plain statements on the store's pool, each write its own short transaction. There is no
``NOTIFY`` for conversation events: a subscriber on another replica polls
:meth:`read_conversation_events` (the turn hub does, every ``poll_s``), which keeps the
``charter_events`` channel for the ledger alone. psycopg errors are translated by
:mod:`charter.stores.postgres_errors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from charter.errors import StoreConflict
from charter.ledger.chain import LedgerKey
from charter.stores import conversations as sql
from charter.stores.conversations import ConversationEvent, ConversationRecord
from charter.stores.postgres_errors import translated

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool


class PostgresConversations:
    _pool: AsyncConnectionPool[Any]
    key: LedgerKey

    async def save_conversation(self, record: ConversationRecord) -> None:
        with translated():
            async with self._pool.connection() as conn:
                await conn.execute(sql.save_sql("%s"), sql.save_params(record, self.key))

    async def claim_turn(self, record: ConversationRecord) -> bool:
        with translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(sql.claim_sql("%s"), sql.save_params(record, self.key))
                return bool(cur.rowcount == 1)

    async def load_conversation(self, conversation_id: str) -> ConversationRecord | None:
        with translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(sql.load_sql("%s"), (conversation_id,))
                row = await cur.fetchone()
        return None if row is None else sql.as_record(row, self.key)

    async def append_conversation_events(
        self, conversation_id: str, events: Sequence[ConversationEvent], *, updated_at: str
    ) -> None:
        rows = [(conversation_id, e.sequence, e.type, e.data) for e in events]
        try:
            with translated():
                async with self._pool.connection() as conn, conn.transaction():
                    # The record first: its row lock orders this append and a retention
                    # sweep (delete_idle_conversations), whichever comes second waits.
                    await conn.execute(sql.touch_updated_sql("%s"), (updated_at, conversation_id))
                    async with conn.cursor() as cur:
                        await cur.executemany(sql.insert_events_sql("%s"), rows)
        except StoreConflict:
            raise sql.sequence_conflict(conversation_id) from None

    async def read_conversation_events(
        self, conversation_id: str, *, after: int, limit: int = 500
    ) -> Sequence[ConversationEvent]:
        with translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(sql.read_events_sql("%s"), (conversation_id, after, limit))
                rows = await cur.fetchall()
        return [sql.as_event(r) for r in rows]

    async def conversation_tail(self, conversation_id: str) -> ConversationEvent | None:
        with translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(sql.tail_sql("%s"), (conversation_id,))
                row = await cur.fetchone()
        return None if row is None else sql.as_event(row)

    async def touch_conversation(self, conversation_id: str, *, watched_at: str) -> None:
        with translated():
            async with self._pool.connection() as conn:
                await conn.execute(sql.touch_watched_sql("%s"), (watched_at, conversation_id))

    async def delete_idle_conversations(self, *, before: str) -> int:
        with translated():
            async with self._pool.connection() as conn, conn.transaction():
                # Records first, each row locked and its updated_at read again after any
                # writer holding it commits (READ COMMITTED): a conversation touched meanwhile
                # is kept, and only the events of the records deleted here go with them.
                cur = await conn.execute(
                    sql.delete_records_sql("%s") + " RETURNING conversation_id", (before,)
                )
                gone = [str(row[0]) for row in await cur.fetchall()]
                if gone:
                    await conn.execute(
                        "DELETE FROM conversation_events WHERE conversation_id = ANY(%s)", (gone,)
                    )
                return len(gone)
