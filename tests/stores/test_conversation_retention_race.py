"""Chat retention on PostgreSQL next to a conversation being written (READ COMMITTED).

Before, the sweep deleted the idle conversations' events first and their records second, in
two statements. A conversation whose record was touched (a new turn, say) between the two
kept its record — the second statement re-reads ``updated_at`` and skips it — but had already
lost its stored events: the record said the conversation was alive, its stream replay was
gone. Now the sweep deletes the records first (``RETURNING`` their ids, each row locked) and
then the events of exactly those, so a conversation touched meanwhile keeps both; and an
append touches the record before it inserts, so it waits for the sweep or the sweep for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import psycopg
import pytest

from charter.stores.conversations import ConversationEvent
from charter.stores.postgres import PostgresStore
from charter.testing.conversation_conformance import conversation_record
from charter.testing.ids import fixed_ledger_key
from tests.stores.conftest import create_database, drop_database

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

OLD = "2030-01-01T00:00:00.000000Z"
CUTOFF = "2030-02-01T00:00:00.000000Z"
NEW = "2030-03-01T00:00:00.000000Z"


@pytest.fixture(scope="module")
def db() -> Iterator[str]:
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def _event(seq: int) -> ConversationEvent:
    return ConversationEvent(sequence=seq, type="text.delta", data=f'{{"n": {seq}}}')


async def test_a_conversation_touched_during_the_sweep_keeps_its_events(db: str) -> None:
    async with PostgresStore.open(db, key=fixed_ledger_key()) as store:
        await store.save_conversation(conversation_record("idle", updated_at=OLD))
        await store.append_conversation_events("idle", [_event(1), _event(2)], updated_at=OLD)
        await store.save_conversation(conversation_record("gone", updated_at=OLD))
        await store.append_conversation_events("gone", [_event(1)], updated_at=OLD)

        # Another replica starts a turn of "idle": its transaction touches the record and
        # commits only once the sweep is under way.
        with psycopg.connect(db) as other:
            other.execute(
                "UPDATE conversations SET updated_at = %s WHERE conversation_id = 'idle'", (NEW,)
            )
            released = threading.Event()

            def commit_later() -> None:
                released.wait(10)
                other.commit()

            committer = threading.Thread(target=commit_later)
            committer.start()
            try:
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tg:

                        async def sweep() -> None:
                            deleted.append(await store.delete_idle_conversations(before=CUTOFF))

                        deleted: list[int] = []
                        tg.start_soon(sweep)
                        await anyio.sleep(0.5)  # the sweep now waits for the turn's row lock
                        released.set()
            finally:
                released.set()
                committer.join()

        assert deleted == [1]  # "gone" only
        assert await store.load_conversation("gone") is None
        assert await store.read_conversation_events("gone", after=0) == []
        kept = await store.load_conversation("idle")
        assert kept is not None
        assert kept.updated_at == NEW
        events = await store.read_conversation_events("idle", after=0)
        assert [e.sequence for e in events] == [1, 2]
