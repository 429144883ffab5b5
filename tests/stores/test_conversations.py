"""The conversation-storage port: one suite, run against the memory, SQLite and PostgreSQL
stores (fresh, empty stores; PostgreSQL on a database of its own)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from charter.errors import StoreConflict, StoreError
from charter.ledger.ports import Store
from charter.stores import migrations
from charter.stores.conversations import (
    SEQUENCE_CONFLICT,
    ConversationEvent,
    ConversationRecord,
    ConversationStore,
)
from charter.stores.memory import MemoryStore
from charter.stores.postgres import PostgresStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio
Opener = Callable[[], AbstractAsyncContextManager[Any]]


def _record(cid: str = "conv-1", **changes: Any) -> ConversationRecord:
    fields: dict[str, Any] = {
        "conversation_id": cid,
        "tenant": "acme",
        "user": "app",
        "run_id": "run-1",
        "turns": 1,
        "updated_at": "2030-01-01T00:00:00.000000Z",
        "history": '[{"role": "user", "text": "hello"}]',
    }
    fields.update(changes)
    return ConversationRecord(**fields)


def _asdict(record: ConversationRecord) -> dict[str, Any]:
    return {f: getattr(record, f) for f in record.__dataclass_fields__}


def _events(first: int, count: int, type_: str = "assistant.delta") -> list[ConversationEvent]:
    return [
        ConversationEvent(sequence=s, type=type_, data=f'{{"sequence": {s}}}')
        for s in range(first, first + count)
    ]


class ConversationStoreSuite:
    """Every backend's conversation rows behave exactly alike."""

    @pytest.fixture
    def opener(self) -> Opener:
        raise NotImplementedError

    async def test_implements_the_port(self, opener: Opener) -> None:
        async with opener() as store:
            assert isinstance(store, ConversationStore)

    async def test_a_record_round_trips_and_is_replaced(self, opener: Opener) -> None:
        async with opener() as store:
            assert await store.load_conversation("conv-1") is None
            await store.save_conversation(_record())
            assert await store.load_conversation("conv-1") == _record()
            later = _record(turns=2, run_id=None, history="[]", updated_at="2030-01-02T00:00:00Z")
            await store.save_conversation(later)
            assert await store.load_conversation("conv-1") == later

    async def test_a_turn_is_claimed_once(self, opener: Opener) -> None:
        """Two processes starting turn 2 of one conversation: the first claim wins, the second
        writes nothing; a conversation without a record is claimed by its first turn."""
        async with opener() as store:
            assert await store.claim_turn(_record(turns=1))
            await store.touch_conversation("conv-1", watched_at="2030-01-01T00:00:01.000000Z")
            mine = _record(turns=2, history="[1]", updated_at="2030-01-02T00:00:00.000000Z")
            theirs = _record(turns=2, history="[2]", updated_at="2030-01-02T00:00:01.000000Z")
            assert await store.claim_turn(mine)
            assert not await store.claim_turn(theirs)
            assert not await store.claim_turn(_record(turns=4))  # not the next turn either
            stored = await store.load_conversation("conv-1")
            assert stored == mine.__class__(
                **{**_asdict(mine), "watched_at": "2030-01-01T00:00:01.000000Z"}
            )

    async def test_events_append_read_after_and_tail(self, opener: Opener) -> None:
        async with opener() as store:
            await store.save_conversation(_record())
            assert await store.conversation_tail("conv-1") is None
            assert await store.read_conversation_events("conv-1", after=0) == []
            await store.append_conversation_events(
                "conv-1", _events(1, 3), updated_at="2030-01-01T00:00:01.000000Z"
            )
            await store.append_conversation_events(
                "conv-1", _events(4, 1, "conversation.completed"), updated_at="2030-01-01T00:00:02Z"
            )
            got = await store.read_conversation_events("conv-1", after=0)
            assert [e.sequence for e in got] == [1, 2, 3, 4]
            assert got[0] == ConversationEvent(
                sequence=1, type="assistant.delta", data='{"sequence": 1}'
            )
            after = await store.read_conversation_events("conv-1", after=2, limit=1)
            assert [e.sequence for e in after] == [3]
            tail = await store.conversation_tail("conv-1")
            assert tail is not None
            assert (tail.sequence, tail.type) == (4, "conversation.completed")
            record = await store.load_conversation("conv-1")
            assert record is not None
            assert record.updated_at == "2030-01-01T00:00:02Z"
            assert await store.read_conversation_events("conv-2", after=0) == []

    async def test_a_stored_sequence_is_a_conflict_and_the_batch_is_not_written(
        self, opener: Opener
    ) -> None:
        async with opener() as store:
            await store.save_conversation(_record())
            await store.append_conversation_events("conv-1", _events(1, 2), updated_at="t1")
            with pytest.raises(StoreConflict) as clash:
                await store.append_conversation_events("conv-1", _events(2, 3), updated_at="t2")
            assert clash.value.reason == SEQUENCE_CONFLICT
            got = await store.read_conversation_events("conv-1", after=0)
            assert [e.sequence for e in got] == [1, 2]  # 3 and 4 went nowhere
            record = await store.load_conversation("conv-1")
            assert record is not None
            assert record.updated_at == "t1"

    async def test_touch_sets_watched_at_and_a_save_keeps_it(self, opener: Opener) -> None:
        async with opener() as store:
            await store.touch_conversation("missing", watched_at="2030-01-01T00:00:05Z")
            await store.save_conversation(_record())
            await store.touch_conversation("conv-1", watched_at="2030-01-01T00:00:05Z")
            await store.save_conversation(_record(turns=2))
            record = await store.load_conversation("conv-1")
            assert record is not None
            assert (record.turns, record.watched_at) == (2, "2030-01-01T00:00:05Z")

    async def test_idle_conversations_are_deleted_with_their_events(self, opener: Opener) -> None:
        async with opener() as store:
            await store.save_conversation(_record("old", updated_at="2030-01-01T00:00:00Z"))
            await store.save_conversation(_record("new", updated_at="2030-01-01T00:00:00Z"))
            await store.append_conversation_events("old", _events(1, 2), updated_at="2030-01-02Z")
            await store.append_conversation_events("new", _events(1, 2), updated_at="2030-01-05Z")
            assert await store.delete_idle_conversations(before="2030-01-03") == 1
            assert await store.load_conversation("old") is None
            assert await store.read_conversation_events("old", after=0) == []
            assert await store.conversation_tail("old") is None
            assert await store.load_conversation("new") is not None
            assert len(await store.read_conversation_events("new", after=0)) == 2
            assert await store.delete_idle_conversations(before="2030-01-03") == 0

    async def test_the_ledger_is_untouched_by_conversation_rows(self, opener: Opener) -> None:
        async with opener() as store:
            await store.append("run-1", [run_created("run-1"), ev("task_created", task_id="t")])
            await store.save_conversation(_record())
            await store.append_conversation_events("conv-1", _events(1, 2), updated_at="t")
            await store.delete_idle_conversations(before="9999")
            head = await store.head("run-1")
            assert head is not None
            assert head.seq == 2


class TestMemoryConversations(ConversationStoreSuite):
    @pytest.fixture
    def opener(self) -> Opener:
        @asynccontextmanager
        async def open_() -> AsyncIterator[Store]:
            store = MemoryStore(key=fixed_ledger_key())
            yield store
            await store.aclose()

        return open_


class TestSQLiteConversations(ConversationStoreSuite):
    @pytest.fixture
    def opener(self, tmp_path: Path) -> Opener:
        counter = iter(range(1000))

        def open_() -> AbstractAsyncContextManager[SQLiteStore]:
            path = tmp_path / f"conv-{next(counter)}.db"
            return SQLiteStore.open(path, key=fixed_ledger_key())

        return open_


@pytest.fixture(scope="module")
def conv_db() -> Iterator[str]:
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


@pytest.mark.postgres
class TestPostgresConversations(ConversationStoreSuite):
    @pytest.fixture
    def opener(self, conv_db: str) -> Opener:
        @asynccontextmanager
        async def open_() -> AsyncIterator[PostgresStore]:
            with psycopg.connect(conv_db, autocommit=True) as conn:  # a fresh, empty schema
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public")
            async with PostgresStore.open(conv_db, key=fixed_ledger_key()) as store:
                yield store

        return open_


async def test_sqlite_conversation_writes_leave_the_ledger_writer_alone(tmp_path: Path) -> None:
    """Chat rows commit on their own connection: the ledger writer's commit count is unmoved."""
    async with SQLiteStore.open(tmp_path / "c.db", key=fixed_ledger_key()) as store:
        await store.append("run-1", [run_created("run-1")])
        commits = store.commits
        await store.save_conversation(_record())
        await store.append_conversation_events("conv-1", _events(1, 5), updated_at="t")
        assert store.commits == commits
        assert len(await store.read_conversation_events("conv-1", after=0)) == 5
    with pytest.raises(StoreError) as closed:
        await store.save_conversation(_record())
    assert closed.value.reason == "STORE_CLOSED"


async def test_sqlite_migrations_7_and_8_add_the_conversation_tables(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with SQLiteStore.open(path, key=fixed_ledger_key()):
        pass
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        (version,) = conn.execute(f"SELECT max(version) FROM {migrations.SCHEMA_TABLE}").fetchone()
        columns = {r[1] for r in conn.execute("PRAGMA table_info(conversations)")}
    assert {"conversations", "conversation_events"} <= tables
    assert "turn_open_since" in columns
    assert version == len(migrations.SQLITE) == 8
    assert len(migrations.POSTGRES) == 7
