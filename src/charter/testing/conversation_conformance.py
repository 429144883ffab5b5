"""The conversation-storage conformance suite: the memory, SQLite and PostgreSQL stores'
conversation rows behave exactly alike.

A plain class: each ``test_*`` method is a coroutine taking ``opener``, a callable that opens
a fresh, empty store (an async context manager) that is both a
:class:`~charter.stores.conversations.ConversationStore` and a ledger
:class:`~charter.ledger.ports.Store`. Nothing here imports pytest; ``tests/conformance.py``
runs it (``ConversationSuite``) and ``tests/stores/test_conversations.py`` gives each store's
``opener``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from charter.errors import StoreConflict
from charter.stores.conversations import (
    SEQUENCE_CONFLICT,
    ConversationEvent,
    ConversationRecord,
    ConversationStore,
)
from charter.testing.raises import raises
from charter.testing.scenarios import ev, run_created

Opener = Callable[[], AbstractAsyncContextManager[Any]]


def conversation_record(cid: str = "conv-1", **changes: Any) -> ConversationRecord:
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


def conversation_events(
    first: int, count: int, type_: str = "assistant.delta"
) -> list[ConversationEvent]:
    return [
        ConversationEvent(sequence=s, type=type_, data=f'{{"sequence": {s}}}')
        for s in range(first, first + count)
    ]


class ConversationConformance:
    """Behaviour every :class:`~charter.stores.conversations.ConversationStore` must have."""

    async def test_implements_the_port(self, opener: Opener) -> None:
        async with opener() as store:
            assert isinstance(store, ConversationStore)

    async def test_a_record_round_trips_and_is_replaced(self, opener: Opener) -> None:
        async with opener() as store:
            assert await store.load_conversation("conv-1") is None
            await store.save_conversation(conversation_record())
            assert await store.load_conversation("conv-1") == conversation_record()
            later = conversation_record(
                turns=2, run_id=None, history="[]", updated_at="2030-01-02T00:00:00Z"
            )
            await store.save_conversation(later)
            assert await store.load_conversation("conv-1") == later

    async def test_a_turn_is_claimed_once(self, opener: Opener) -> None:
        """Two processes starting turn 2 of one conversation: the first claim wins, the second
        writes nothing; a conversation without a record is claimed by its first turn."""
        async with opener() as store:
            assert await store.claim_turn(conversation_record(turns=1))
            await store.touch_conversation("conv-1", watched_at="2030-01-01T00:00:01.000000Z")
            mine = conversation_record(
                turns=2, history="[1]", updated_at="2030-01-02T00:00:00.000000Z"
            )
            theirs = conversation_record(
                turns=2, history="[2]", updated_at="2030-01-02T00:00:01.000000Z"
            )
            assert await store.claim_turn(mine)
            assert not await store.claim_turn(theirs)
            assert not await store.claim_turn(
                conversation_record(turns=4)
            )  # not the next turn either
            stored = await store.load_conversation("conv-1")
            assert stored == mine.__class__(
                **{**_asdict(mine), "watched_at": "2030-01-01T00:00:01.000000Z"}
            )

    async def test_events_append_read_after_and_tail(self, opener: Opener) -> None:
        async with opener() as store:
            await store.save_conversation(conversation_record())
            assert await store.conversation_tail("conv-1") is None
            assert await store.read_conversation_events("conv-1", after=0) == []
            await store.append_conversation_events(
                "conv-1", conversation_events(1, 3), updated_at="2030-01-01T00:00:01.000000Z"
            )
            await store.append_conversation_events(
                "conv-1",
                conversation_events(4, 1, "conversation.completed"),
                updated_at="2030-01-01T00:00:02Z",
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
            await store.save_conversation(conversation_record())
            await store.append_conversation_events(
                "conv-1", conversation_events(1, 2), updated_at="t1"
            )
            with raises(StoreConflict) as clash:
                await store.append_conversation_events(
                    "conv-1", conversation_events(2, 3), updated_at="t2"
                )
            assert clash.value.reason == SEQUENCE_CONFLICT
            got = await store.read_conversation_events("conv-1", after=0)
            assert [e.sequence for e in got] == [1, 2]  # 3 and 4 went nowhere
            record = await store.load_conversation("conv-1")
            assert record is not None
            assert record.updated_at == "t1"

    async def test_touch_sets_watched_at_and_a_save_keeps_it(self, opener: Opener) -> None:
        async with opener() as store:
            await store.touch_conversation("missing", watched_at="2030-01-01T00:00:05Z")
            await store.save_conversation(conversation_record())
            await store.touch_conversation("conv-1", watched_at="2030-01-01T00:00:05Z")
            await store.save_conversation(conversation_record(turns=2))
            record = await store.load_conversation("conv-1")
            assert record is not None
            assert (record.turns, record.watched_at) == (2, "2030-01-01T00:00:05Z")

    async def test_idle_conversations_are_deleted_with_their_events(self, opener: Opener) -> None:
        async with opener() as store:
            await store.save_conversation(
                conversation_record("old", updated_at="2030-01-01T00:00:00Z")
            )
            await store.save_conversation(
                conversation_record("new", updated_at="2030-01-01T00:00:00Z")
            )
            await store.append_conversation_events(
                "old", conversation_events(1, 2), updated_at="2030-01-02Z"
            )
            await store.append_conversation_events(
                "new", conversation_events(1, 2), updated_at="2030-01-05Z"
            )
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
            await store.save_conversation(conversation_record())
            await store.append_conversation_events(
                "conv-1", conversation_events(1, 2), updated_at="t"
            )
            await store.delete_idle_conversations(before="9999")
            head = await store.head("run-1")
            assert head is not None
            assert head.seq == 2


__all__ = [
    "ConversationConformance",
    "Opener",
    "conversation_events",
    "conversation_record",
]
