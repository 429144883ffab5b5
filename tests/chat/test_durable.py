"""Durable conversations: history and stream events in the conversation store survive a
restart, are shared by two hubs ("replicas") on one database, and go with retention.

Library level (no HTTP): runtimes opened on a real SQLite file (and on PostgreSQL for the
restart), the key-value project's scripted model, a fake clock for the hub.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import textwrap
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.errors import PermissionDenied
from charter.ledger.events import format_at
from charter.proposals import ProposalService, load_proposal_settings
from charter.providers import ChatRequest, Orchestrator, ScriptedProvider
from charter.providers.base import ToolInvoker, TurnRequest
from charter.providers.events import StreamEvent
from charter.providers.orchestrator import ChatSettings
from charter.providers.turns import Conversation, TurnHub
from charter.runtime import Runtime, open_runtime
from charter.stores.conversations import (
    ConversationEvent,
    ConversationRecord,
    ConversationStore,
)
from charter.stores.memory import MemoryStore
from charter.testing.ids import fixed_ledger_key
from tests.chat.conftest import KV_SCRIPT, FakeClock
from tests.server._harness import Project, write_served_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio
RETENTION_S = 3600.0


class Recording:
    """The scripted model, remembering every turn request it was given."""

    name = "scripted"

    def __init__(self) -> None:
        self.inner = ScriptedProvider.from_document(_script())
        self.requests: list[TurnRequest] = []

    async def create_session(self, conversation_id: str) -> Any:
        return await self.inner.create_session(conversation_id)

    def execute_turn(self, request: TurnRequest, invoker: ToolInvoker) -> Any:
        self.requests.append(request)
        return self.inner.execute_turn(request, invoker)


def _script() -> Any:
    import yaml

    doc = yaml.safe_load(textwrap.dedent(KV_SCRIPT))
    doc["rules"].insert(
        0, {"match": "(?i)long", "steps": [{"say": " ".join(f"w{i}" for i in range(40))}]}
    )
    return doc


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return write_served_project(tmp_path_factory.mktemp("durable"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'chat.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def _hub(
    rt: Runtime,
    provider: Any,
    clock: FakeClock,
    store: ConversationStore | None = None,
    **options: Any,
) -> TurnHub:
    orchestrator = Orchestrator(
        rt,
        provider=provider,
        proposals=ProposalService(rt, load_proposal_settings(rt.deployment.source)),
        settings=ChatSettings(retention_s=RETENTION_S, approval_poll_s=0.02),
    )
    conversations = store if store is not None else rt.kernel.store
    assert isinstance(conversations, ConversationStore)
    return TurnHub(orchestrator, clock=clock, store=conversations, poll_s=0.02, **options)


@asynccontextmanager
async def _replica(
    project: Project, url: str, clock: FakeClock, provider: Any | None = None
) -> AsyncIterator[tuple[Runtime, TurnHub]]:
    async with open_runtime(project.root, store=url) as rt:
        hub = _hub(rt, provider or Recording(), clock)
        try:
            yield rt, hub
        finally:
            await hub.close()


async def _turn(
    hub: TurnHub, rt: Runtime, message: str, conv_id: str = "", who: str = "app"
) -> tuple[Conversation, list[dict[str, Any]]]:
    request = ChatRequest(
        conversation_id=conv_id, principal=rt.principal(who), message=message, profile="all"
    )
    conv = await hub.start(request)
    return conv, [e.to_dict() async for e in hub.subscribe(conv, after=conv.turn_start)]


async def _all(hub: TurnHub, conv: Conversation, after: int = 0) -> list[dict[str, Any]]:
    return [e.to_dict() async for e in hub.subscribe(conv, after=after)]


def _sequences(events: Sequence[dict[str, Any]]) -> list[int]:
    return [e["sequence"] for e in events]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_restarted_server_gives_the_model_the_earlier_messages(
    project: Project, backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{backend}_url")
    clock = FakeClock()
    async with _replica(project, url, clock) as (rt, hub):
        conv, first = await _turn(hub, rt, "hello")
        conv_id, run_id = conv.conversation_id, conv.run_id
    assert first[-1]["type"] == "conversation.completed"

    model = Recording()
    async with _replica(project, url, clock, model) as (rt, hub):
        assert hub.conversations == {}  # nothing carried over in memory
        conv, second = await _turn(hub, rt, "hello again", conv_id)
    assert conv.conversation_id == conv_id
    assert conv.run_id == run_id  # the same ledger run
    (seen,) = model.requests
    assert [(m.role, m.text) for m in seen.messages] == [
        ("user", "hello"),
        ("assistant", "Hello from the script."),
        ("user", "hello again"),
    ]
    assert second[0]["sequence"] == first[-1]["sequence"] + 1
    assert second[0]["data"]["turnId"].startswith("t2-")


async def test_a_fresh_hub_replays_the_events_after_last_event_id(
    project: Project, sqlite_url: str
) -> None:
    clock = FakeClock()
    async with _replica(project, sqlite_url, clock) as (rt, hub):
        conv, events = await _turn(hub, rt, "a slow one, please")
        conv_id = conv.conversation_id
    assert _sequences(events) == list(range(1, len(events) + 1))

    async with _replica(project, sqlite_url, clock) as (rt, hub):
        again = await hub.find(conv_id, "acme", "app")
        assert await _all(hub, again) == events  # everything, as it was streamed
        middle = events[4]["sequence"]
        assert await _all(hub, again, after=middle) == events[5:]
        assert await _all(hub, again, after=events[-1]["sequence"]) == []
        # a second turn here streams on from the stored sequence numbers
        _, more = await _turn(hub, rt, "hello", conv_id)
        assert more[0]["sequence"] == events[-1]["sequence"] + 1
        assert await _all(hub, again) == events + more


async def test_a_subscriber_on_another_replica_follows_the_turn_to_its_end(
    project: Project, sqlite_url: str
) -> None:
    clock = FakeClock()
    async with (
        _replica(project, sqlite_url, clock) as (rt_a, hub_a),
        _replica(project, sqlite_url, clock) as (rt_b, hub_b),
    ):
        request = ChatRequest(
            conversation_id="",
            principal=rt_a.principal("app"),
            message="a slow one, please",
            profile="all",
        )
        conv = await hub_a.start(request)
        on_a = asyncio.create_task(_all(hub_a, conv))
        store = rt_b.kernel.store
        assert isinstance(store, ConversationStore)
        while await store.conversation_tail(conv.conversation_id) is None:
            await asyncio.sleep(0.01)
        assert conv.running  # B joins mid-turn
        remote = await hub_b.find(conv.conversation_id, "acme", "app")
        with pytest.raises(PermissionDenied) as busy:
            await hub_b.start(replace_conv(request, conv.conversation_id, rt_b))
        assert busy.value.reason == "TURN_IN_PROGRESS"
        on_b = await asyncio.wait_for(_all(hub_b, remote), timeout=30)
        streamed = await on_a
    assert on_b == streamed
    assert on_b[-1]["type"] == "conversation.completed"
    assert on_b[-1]["data"]["status"] == "completed"
    assert _sequences(on_b) == list(range(1, len(on_b) + 1))


def replace_conv(request: ChatRequest, conv_id: str, rt: Runtime) -> ChatRequest:
    return ChatRequest(
        conversation_id=conv_id,
        principal=rt.principal("app"),
        message="hello",
        profile=request.profile,
    )


async def test_retention_deletes_the_stored_conversation(project: Project, sqlite_url: str) -> None:
    clock = FakeClock()
    async with _replica(project, sqlite_url, clock) as (rt, hub):
        conv, _ = await _turn(hub, rt, "hello")
        kept, _ = await _turn(hub, rt, "hello")
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        await hub.sweep()
        assert await store.load_conversation(conv.conversation_id) is not None
        clock.advance(RETENTION_S / 2)
        _, _ = await _turn(hub, rt, "hello again", kept.conversation_id)  # kept is active
        clock.advance(RETENTION_S / 2 + 1)
        await hub.sweep()
        assert conv.conversation_id not in hub.conversations
        assert await store.load_conversation(conv.conversation_id) is None
        assert await store.read_conversation_events(conv.conversation_id, after=0) == []
        assert await store.load_conversation(kept.conversation_id) is not None
        with pytest.raises(PermissionDenied) as gone:
            await hub.find(conv.conversation_id, "acme", "app")
        assert gone.value.reason == "CONVERSATION_NOT_FOUND"
        head = await rt.kernel.store.head(conv.run_id or "")
        assert head is not None  # the ledger keeps the turn


async def test_another_users_conversation_stays_not_found_after_a_restart(
    project: Project, sqlite_url: str
) -> None:
    clock = FakeClock()
    async with _replica(project, sqlite_url, clock) as (rt, hub):
        conv, _ = await _turn(hub, rt, "hello")
    async with _replica(project, sqlite_url, clock) as (rt, hub):
        for tenant, user in (("acme", "alice"), ("globex", "bob")):
            with pytest.raises(PermissionDenied) as missing:
                await hub.find(conv.conversation_id, tenant, user)
            assert missing.value.reason == "CONVERSATION_NOT_FOUND"
        other, events = await _turn(hub, rt, "hello", conv.conversation_id, who="alice")
        assert other.conversation_id != conv.conversation_id
        assert events[0]["sequence"] == 1
        assert other.history[0].text == "hello"
        assert len(other.history) == 2  # alice's own, nothing of app's


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__(key=fixed_ledger_key())
        self.writes: list[list[int]] = []

    async def append_conversation_events(
        self, conversation_id: str, events: Sequence[ConversationEvent], *, updated_at: str
    ) -> None:
        self.writes.append([e.sequence for e in events])
        await super().append_conversation_events(conversation_id, events, updated_at=updated_at)


async def test_deltas_are_coalesced_and_the_stored_stream_has_no_gap(
    project: Project, sqlite_url: str
) -> None:
    store = CountingStore()
    async with open_runtime(project.root, store=sqlite_url) as rt:
        hub = _hub(rt, Recording(), FakeClock(), store, flush_s=3600.0)
        conv, events = await _turn(hub, rt, "a long answer")
        await hub.close()
    deltas = [e for e in events if e["type"] == "assistant.delta"]
    assert "".join(d["data"]["text"] for d in deltas) == " ".join(f"w{i}" for i in range(40))
    # one delta per word, give or take: the stream redactor holds back a word's last character
    # when it could begin one of the deployment's secrets (random keys) and emits it later
    assert 35 <= len(deltas) <= 41
    # one write per non-delta event (each takes the deltas before it), none per token
    assert len(store.writes) == len(events) - len(deltas)
    assert [s for w in store.writes for s in w] == _sequences(events)
    stored = await store.read_conversation_events(conv.conversation_id, after=0)
    assert [e.sequence for e in stored] == list(range(1, len(events) + 1))


async def _orphan(store: ConversationStore, conv_id: str, updated_at: str) -> None:
    """A conversation whose turn started on a process that is gone (no completed event)."""
    await store.save_conversation(
        ConversationRecord(
            conversation_id=conv_id,
            tenant="acme",
            user="app",
            run_id=None,
            turns=1,
            updated_at=updated_at,
            history='[{"role": "user", "text": "hello"}]',
        )
    )
    started = StreamEvent(
        type="conversation.started",
        conversation_id=conv_id,
        sequence=1,
        timestamp=updated_at,
        data={},
    )
    row = ConversationEvent(sequence=1, type=started.type, data=json.dumps(started.to_dict()))
    await store.append_conversation_events(conv_id, [row], updated_at=updated_at)


async def test_a_turn_left_open_by_a_lost_process_is_closed_before_the_next(
    project: Project,
) -> None:
    clock = FakeClock()
    async with _replica(project, "memory:", clock) as (rt, hub):
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        await _orphan(store, "conv-recent", format_at(clock()))
        with pytest.raises(PermissionDenied) as busy:  # it may still run on another replica
            await _turn(hub, rt, "hello", "conv-recent")
        assert busy.value.reason == "TURN_IN_PROGRESS"

        await _orphan(store, "conv-lost", format_at(clock() - timedelta(seconds=301)))
        conv, events = await _turn(hub, rt, "hello again", "conv-lost")
        assert events[0]["sequence"] == 3
        stored = [
            json.loads(e.data) for e in await store.read_conversation_events("conv-lost", after=0)
        ]
        assert [e["sequence"] for e in stored] == list(range(1, len(stored) + 1))
        assert stored[1]["type"] == "conversation.completed"
        assert stored[1]["data"] == {"status": "cancelled", "reason": "TURN_LOST"}
        assert [m.text for m in conv.history][:2] == ["hello", "hello again"]


async def test_a_lost_turn_that_stored_nothing_is_refused_while_recent_then_superseded(
    project: Project,
) -> None:
    """A record says a turn is open, but no event of it was stored (its process died at once):
    refused within the grace window, then the next turn simply goes on, with no lost-turn
    event in the stream."""
    clock = FakeClock()
    async with _replica(project, "memory:", clock) as (rt, hub):
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        conv, first = await _turn(hub, rt, "hello")
        assert conv.task is not None
        await conv.task
        cid = conv.conversation_id
        record = await store.load_conversation(cid)
        assert record is not None
        opened = dataclasses.replace(
            record, turns=2, turn_open_since=format_at(clock()), updated_at=format_at(clock())
        )
        await store.save_conversation(opened)  # another process claimed turn 2, then died
        hub.conversations.clear()
        with pytest.raises(PermissionDenied) as busy:
            await _turn(hub, rt, "hello again", cid)
        assert busy.value.reason == "TURN_IN_PROGRESS"

        clock.advance(301)
        conv, events = await _turn(hub, rt, "hello again", cid)
    assert conv.turns == 3
    assert events[0]["sequence"] == first[-1]["sequence"] + 1
    assert events[0]["type"] == "conversation.started"
    assert all(e["data"].get("reason") != "TURN_LOST" for e in events)


async def test_a_subscriber_on_another_replica_keeps_the_turn_from_the_grace_window(
    project: Project,
) -> None:
    clock = FakeClock()
    async with _replica(project, "memory:", clock) as (rt, hub_a):
        hub_b = _hub(rt, Recording(), clock)  # a second hub on the same store: a replica
        request = ChatRequest(
            conversation_id="", principal=rt.principal("app"), message="store this", profile="all"
        )
        conv = await hub_a.start(request)
        async for event in hub_a.subscribe(conv, after=0):
            if event.type == "approval.required":
                break  # A's client leaves; nobody decides the approval
        await hub_a.sweep()
        remote = await hub_b.find(conv.conversation_id, "acme", "app")
        following = asyncio.create_task(_all(hub_b, remote))
        await asyncio.sleep(0.1)  # B replays, starts polling and touches the record
        clock.advance(200)
        await asyncio.sleep(0.2)  # B polls and touches the record
        clock.advance(200)  # 400 s since A's client left
        await hub_a.sweep()
        assert conv.running  # watched from B within the window
        await asyncio.sleep(0.2)
        assert following.done()  # B stopped after grace_s without a new event
        clock.advance(301)
        await hub_a.sweep()
        assert not conv.running
        stored = await _all(hub_b, remote)
        await hub_b.close()
    assert stored[-1]["data"] == {"status": "cancelled", "reason": "DISCONNECT_GRACE_EXPIRED"}


async def test_the_stored_history_is_redacted_like_the_events(
    project: Project, sqlite_url: str
) -> None:
    """The model sees the message as written; what is stored keeps none of the deployment's
    secrets (here a pattern), in the history as in the stream events."""
    from charter.kernel.redaction import Redactor

    secret = "sk-live0123456789abcdef"
    clock = FakeClock()
    model = Recording()
    async with _replica(project, sqlite_url, clock, model) as (rt, hub):
        rt.kernel.redactor = Redactor(patterns=[r"sk-live[0-9a-f]{16}"])
        conv, _ = await _turn(hub, rt, f"hello, my key is {secret}")
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        record = await store.load_conversation(conv.conversation_id)
        stored = await store.read_conversation_events(conv.conversation_id, after=0)
    assert secret in model.requests[0].messages[-1].text
    assert record is not None
    assert "hello, my key is" in record.history
    assert secret not in record.history
    assert all(secret not in e.data for e in stored)


class Gated(Recording):
    """The scripted model, holding each turn until ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    def execute_turn(self, request: TurnRequest, invoker: ToolInvoker) -> Any:
        inner = super().execute_turn(request, invoker)

        async def held() -> Any:
            await self.gate.wait()
            async for event in inner:
                yield event

        return held()


def _request(rt: Runtime, conv_id: str, message: str) -> ChatRequest:
    return ChatRequest(
        conversation_id=conv_id, principal=rt.principal("app"), message=message, profile="all"
    )


async def test_a_replica_refuses_a_turn_another_has_started_before_it_stored_an_event(
    project: Project,
) -> None:
    clock = FakeClock()
    model_a, model_b = Gated(), Recording()
    async with _replica(project, "memory:", clock, model_a) as (rt, hub_a):
        hub_b = _hub(rt, model_b, clock)
        try:
            model_a.gate.set()
            conv, _ = await _turn(hub_a, rt, "hello")
            cid = conv.conversation_id
            model_a.gate.clear()
            conv_a = await hub_a.start(_request(rt, cid, "second, on A"))
            # A's turn is held before its model answers: only its record says it is open.
            with pytest.raises(PermissionDenied) as busy:
                await hub_b.start(_request(rt, cid, "second, on B"))
            assert busy.value.reason == "TURN_IN_PROGRESS"
            model_a.gate.set()
            await _all(hub_a, conv_a, after=conv_a.turn_start)
            conv_b, events = await _turn(hub_b, rt, "third, on B", cid)
        finally:
            await hub_b.close()
    assert events[-1]["data"]["status"] == "completed"
    assert conv_b.turns == 3
    (seen,) = model_b.requests
    assert [m.text for m in seen.messages if m.role == "user"] == [
        "hello",
        "second, on A",
        "third, on B",
    ]
    # each answered once: the first turn's last writes did not close (or answer) the second
    assert [m.role for m in seen.messages] == ["user", "assistant"] * 2 + ["user"]


async def test_two_replicas_starting_the_same_turn_at_once_run_it_once(
    project: Project,
) -> None:
    clock = FakeClock()
    async with _replica(project, "memory:", clock) as (rt, hub_a):
        hub_b = _hub(rt, Recording(), clock)
        try:
            conv, _ = await _turn(hub_a, rt, "hello")
            cid = conv.conversation_id
            await hub_b.find(cid, conv.tenant, conv.user)  # both know it, idle
            got = await asyncio.gather(
                hub_a.start(_request(rt, cid, "from A")),
                hub_b.start(_request(rt, cid, "from B")),
                return_exceptions=True,
            )
            refused = [g for g in got if isinstance(g, PermissionDenied)]
            started = [g for g in got if isinstance(g, Conversation)]
            assert len(refused) == 1
            assert refused[0].reason == "TURN_IN_PROGRESS"
            (winner,) = started
            hub = hub_a if got[0] is winner else hub_b
            events = await _all(hub, winner, after=winner.turn_start)
        finally:
            await hub_b.close()
    assert events[-1]["type"] == "conversation.completed"
    assert winner.turns == 2


async def test_reading_an_old_conversation_does_not_keep_it_past_retention(
    project: Project, sqlite_url: str
) -> None:
    """A replica that loads an idle conversation (to replay its events) keeps the stored idle
    time: both copies go at retention, and a later message finds nothing to continue."""
    clock = FakeClock()
    async with _replica(project, sqlite_url, clock) as (rt, hub_a):
        hub_b = _hub(rt, Recording(), clock)
        try:
            conv, _ = await _turn(hub_a, rt, "hello")
            assert conv.task is not None
            await conv.task  # its last writes, stamped now
            clock.advance(RETENTION_S - 10)
            loaded = await hub_b.find(conv.conversation_id, conv.tenant, conv.user)
            await _all(hub_b, loaded)  # a late reader on another replica
            clock.advance(11)
            await hub_a.sweep()  # deletes the stored conversation
            await hub_b.sweep()
            assert conv.conversation_id not in hub_b.conversations
            fresh, _ = await _turn(hub_b, rt, "hello again", conv.conversation_id)
        finally:
            await hub_b.close()
    store = rt.kernel.store
    assert isinstance(store, ConversationStore)
    assert fresh.history[0].text != "hello"  # not the deleted conversation's history


async def test_a_message_sent_the_moment_a_turn_ends_starts_the_next_turn(
    project: Project, sqlite_url: str
) -> None:
    """A client that answers as soon as it sees ``conversation.completed`` is not refused
    ``TURN_IN_PROGRESS``: the store shows the turn closed before anyone sees it end (it was
    saved after, and the next turn read the record still open, about one time in ten)."""
    clock = FakeClock()
    async with _replica(project, sqlite_url, clock) as (rt, hub):
        conv_id = ""
        for turn in range(30):
            conv, events = await _turn(hub, rt, f"hello {turn}", conv_id)
            assert events[-1]["type"] == "conversation.completed", events[-1]
            conv_id = conv.conversation_id
        assert conv.turns == 30
