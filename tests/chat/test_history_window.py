"""A conversation that lasts for days sends the model, and keeps, a bounded window of its
newest messages (``chat.history_bytes``), starting at a user message — not every message
since it began, which would outgrow any model's context and rewrite an ever larger record
twice a turn. Real SQLite file, a restart in between, the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.errors import ConfigError
from charter.proposals import ProposalService, load_proposal_settings
from charter.providers import Orchestrator
from charter.providers.base import ChatMessage
from charter.providers.config import parse_chat_config
from charter.providers.orchestrator import ChatSettings, windowed
from charter.providers.turns import TurnHub
from charter.runtime import open_runtime
from charter.stores.conversations import ConversationStore
from tests.chat.conftest import FakeClock
from tests.chat.test_durable import Recording, _turn
from tests.server._harness import Project, write_served_project

pytestmark = pytest.mark.anyio
BUDGET = 2_000


def _hub(rt, model: Recording) -> TurnHub:  # type: ignore[no-untyped-def]
    orchestrator = Orchestrator(
        rt,
        provider=model,
        proposals=ProposalService(rt, load_proposal_settings(rt.deployment.source)),
        settings=ChatSettings(history_bytes=BUDGET, approval_poll_s=0.02),
    )
    store = rt.kernel.store
    assert isinstance(store, ConversationStore)
    return TurnHub(orchestrator, clock=FakeClock(), store=store, poll_s=0.02)


def _size(messages: list[ChatMessage] | tuple[ChatMessage, ...]) -> int:
    return sum(len(m.text.encode()) for m in messages)


async def test_a_long_conversation_sends_and_keeps_only_its_newest_messages(
    tmp_path: Path,
) -> None:
    project: Project = write_served_project(tmp_path / "p")
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    model = Recording()
    conv_id = ""
    async with open_runtime(project.root, store=url) as rt:
        hub = _hub(rt, model)
        try:
            for turn in range(40):
                conv, events = await _turn(hub, rt, f"message {turn:02d} " + "x" * 90, conv_id)
                assert events[-1]["type"] == "conversation.completed", events[-1]
                conv_id = conv.conversation_id
        finally:
            await hub.close()
    first, last = model.requests[0].messages, model.requests[-1].messages
    assert len(first) == 1
    assert last[-1].text.startswith("message 39 ")
    assert last[0].role == "user"
    assert _size(last[:-1]) <= BUDGET  # the window, then this turn's message
    assert len(last) < 2 * 40 - 1  # the oldest messages were dropped
    assert not any(m.text.startswith("message 00 ") for m in last)
    # after a restart the stored history is the same bounded window
    model = Recording()
    async with open_runtime(project.root, store=url) as rt:
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        record = await store.load_conversation(conv_id)
        assert record is not None
        stored = json.loads(record.history)
        assert sum(len(m["text"].encode()) for m in stored) <= BUDGET + 200
        hub = _hub(rt, model)
        try:
            _, events = await _turn(hub, rt, "message 40 after the restart", conv_id)
        finally:
            await hub.close()
    (request,) = model.requests
    assert request.messages[-1].text == "message 40 after the restart"
    assert request.messages[0].role == "user"
    assert _size(request.messages[:-1]) <= BUDGET
    assert any(m.text.startswith("message 39 ") for m in request.messages)


def test_the_window_starts_at_a_user_message_and_keeps_the_newest_one() -> None:
    user = [ChatMessage(role="user", text=f"u{i}" + "a" * 8) for i in range(3)]
    said = [ChatMessage(role="assistant", text=f"a{i}" + "b" * 8) for i in range(3)]
    history = [m for pair in zip(user, said, strict=True) for m in pair]  # six messages of 10 bytes
    assert windowed(history, 1_000) == history
    assert windowed(history, 40) == history[2:]  # u1 a1 u2 a2
    assert windowed(history, 35) == history[4:]  # a1 would start it: it starts at u2
    assert windowed(history, 5) == history[5:]  # the newest message alone, even over
    assert windowed([], 10) == []


def test_history_bytes_must_be_a_positive_number(tmp_path: Path) -> None:
    config = parse_chat_config({"history_bytes": 4096}, base=tmp_path)
    assert config.settings.history_bytes == 4096
    assert parse_chat_config({}, base=tmp_path).settings.history_bytes == 256 * 1024
    with pytest.raises(ConfigError, match="history_bytes must be a positive number"):
        parse_chat_config({"history_bytes": 0}, base=tmp_path)
