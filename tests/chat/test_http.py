"""``/v1/chat`` over a real server on loopback: the workflow-copilot story, resuming after a
disconnect, the grace window, approvals inside a turn decided through a second server
process, and conversations that belong to their user."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.client import Client
from charter.errors import InvalidInput, PermissionDenied
from charter.runtime import open_runtime
from tests.chat.conftest import Live
from tests.server._harness import Project, spawn_serve


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def _data(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == type_]


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_workflow_copilot_story_end_to_end(copilot: Live) -> None:
    with (
        Client(copilot.url, copilot.keys["app"]) as app,
        Client(copilot.url, copilot.keys["alice"]) as alice,
    ):
        events = list(app.chat("please create a workflow for onboarding", agent="copilot"))
        assert _types(events)[0] == "conversation.started"
        assert _types(events)[-1] == "conversation.completed"
        assert events[0]["data"]["provider"] == "scripted"
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        assert [r["status"] for r in _data(events, "tool.result")] == ["succeeded"] * 3
        (created,) = _data(events, "proposal.created")
        assert created["status"] == "validated"
        assert created["diff"]["added"] == ["a1", "a2"]
        run_id = events[0]["data"]["runId"]
        pid = created["proposalId"]

        with pytest.raises(InvalidInput) as early:
            alice.apply_proposal(pid)
        assert early.value.reason == "PROPOSAL_ILLEGAL_TRANSITION"
        assert alice.approve_proposal(pid)["status"] == "approved"
        applied = alice.apply_proposal(pid)
        assert applied["status"] == "applied"
        assert applied["applied"]["result"] == {"definition_id": "onboarding", "version": 1}

        # a second conversation proposes two updates on one baseline: the second is stale
        events = list(app.chat("update the onboarding workflow", agent="copilot"))
        first, second = (c["proposalId"] for c in _data(events, "proposal.created"))
        for pid in (first, second):
            alice.approve_proposal(pid)
        assert alice.apply_proposal(first)["status"] == "applied"
        with pytest.raises(InvalidInput) as stale:
            alice.apply_proposal(second)
        assert stale.value.reason == "PROPOSAL_BASELINE_STALE"
        assert alice.get_proposal(second)["status"] == "approved"

        for run in {run_id, events[0]["data"]["runId"], applied["run_id"]}:
            report = alice.verify_run(run)
            assert report["ok"], report


def test_disconnect_then_resume_gets_exactly_the_missing_events(kv: Live) -> None:
    with Client(kv.url, kv.keys["app"]) as app:
        seen: list[dict[str, Any]] = []
        for event in app.chat("a slow one, please"):
            seen.append(event)
            if event["type"] == "tool.started":
                break  # the client drops mid-turn
        conv_id = seen[0]["conversationId"]
        conv = kv.hub.conversations[conv_id]
        _wait(lambda: not conv.running, "the detached turn to finish")
        rest = list(app.chat_events(conv_id, after=seen[-1]["sequence"]))
        everything = list(app.chat_events(conv_id))
    assert rest, "the reconnect got nothing"
    assert rest[0]["sequence"] == seen[-1]["sequence"] + 1
    assert seen + rest == everything
    assert [e["sequence"] for e in everything] == list(range(1, len(everything) + 1))
    assert _types(everything)[-1] == "conversation.completed"
    assert everything[-1]["data"]["status"] == "completed"
    assert [r["status"] for r in _data(rest, "tool.result")] == ["succeeded", "succeeded"]
    assert "".join(d["text"] for d in _data(rest, "assistant.delta")).endswith("succeeded.")


def test_a_client_that_never_returns_is_cancelled_after_the_grace_window(kv: Live) -> None:
    with Client(kv.url, kv.keys["app"]) as app:
        seen: list[dict[str, Any]] = []
        for event in app.chat("store this"):
            seen.append(event)
            if event["type"] == "approval.required":
                break  # the turn now waits for a decision nobody makes; the client is gone
        conv = kv.hub.conversations[seen[0]["conversationId"]]
        _wait(lambda: conv.subscribers == 0 and conv.detached_at is not None, "the detach")
        kv.clock.advance(299)
        time.sleep(0.2)  # several sweeps inside the window: the turn must survive them
        assert conv.running
        kv.clock.advance(2)
        _wait(lambda: not conv.running, "the grace window to cancel the turn")
        stored = list(app.chat_events(conv.conversation_id))
    assert _types(stored)[-1] == "conversation.completed"
    assert stored[-1]["data"] == {"status": "cancelled", "reason": "DISCONNECT_GRACE_EXPIRED"}
    assert [e["sequence"] for e in stored] == list(range(1, len(stored) + 1))


def _lingering(journal: Path) -> bool:
    lines = journal.read_text().splitlines() if journal.exists() else []
    return any(
        line["tool"] == "kv.slow" and str(line.get("call_id", "")).endswith("l1")
        for line in map(json.loads, lines)
    )


async def _calls(live: Live) -> list[Any]:
    async with open_runtime(live.root, store="sqlite:///.charter/charter.db") as rt:
        return list(await rt.calls(tenant="acme", limit=1000))


def test_a_turn_cancelled_after_the_grace_window_leaves_its_call_terminal(kv: Live) -> None:
    """Before: the call the cancelled turn had in flight stayed ``dispatching`` for good in
    the live server (reconcile skips a live owner; a retry waited and answered
    ``dispatching``)."""
    with Client(kv.url, kv.keys["app"]) as app:
        seen: list[dict[str, Any]] = []
        for event in app.chat("linger a while"):
            seen.append(event)
            if event["type"] == "tool.started":
                break  # the tool is running; the client is gone for good
        conv = kv.hub.conversations[seen[0]["conversationId"]]
        run_id = seen[0]["data"]["runId"]
        journal = kv.root / "journal.txt"
        _wait(lambda: _lingering(journal), "the tool to run")
        _wait(lambda: conv.subscribers == 0 and conv.detached_at is not None, "the detach")
        kv.clock.advance(301)
        _wait(lambda: not conv.running, "the grace window to cancel the turn")
        stored = list(app.chat_events(conv.conversation_id))
        assert stored[-1]["data"] == {"status": "cancelled", "reason": "DISCONNECT_GRACE_EXPIRED"}
        rows = asyncio.run(_calls(kv))
        [row] = [r for r in rows if r.tool_id == "kv.slow" and r.run_id == run_id]
        assert row.state == "unknown", row  # written shielded from the turn's cancellation
        assert row.receipt["error"]["reason"] == "CALL_CANCELLED"
        assert app.verify_run(run_id)["ok"] is True


@pytest.fixture(scope="module")
def second_server(kv_project: Project, kv: Live) -> Iterator[str]:
    with spawn_serve(kv_project.root, "sqlite:///.charter/charter.db") as url:
        yield url


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_approval_inside_a_turn_decided_through_a_second_server(
    kv: Live, second_server: str, decision: str
) -> None:
    with Client(kv.url, kv.keys["app"]) as app, Client(second_server, kv.keys["alice"]) as alice_b:
        events: list[dict[str, Any]] = []
        for event in app.chat("store the colour"):
            events.append(event)
            if event["type"] == "approval.required":
                approval = event["data"]
                assert approval["tool"] == "kv_put"
                assert approval["arguments"] == {"key": "color", "value": "blue"}
                assert approval["expiresAt"]
                if decision == "approve":
                    alice_b.approve(approval["approvalId"], reason="fine")
                else:
                    alice_b.reject(approval["approvalId"], reason="no")
    assert _types(events)[-1] == "conversation.completed"
    (result,) = _data(events, "tool.result")
    text = "".join(d["text"] for d in _data(events, "assistant.delta"))
    if decision == "approve":
        assert result["status"] == "succeeded"
        assert text.endswith("The write ended succeeded.")
    else:
        assert result["status"] in {"denied", "rejected"}
        assert text.endswith(f"The write ended {result['status']}.")  # the model saw it


def test_conversations_belong_to_their_user(kv: Live) -> None:
    with Client(kv.url, kv.keys["app"]) as app:
        events = list(app.chat("hello"))
    conv_id = events[0]["conversationId"]
    for other in ("alice", "bob"):  # another user of the tenant, another tenant
        with Client(kv.url, kv.keys[other]) as cl:
            with pytest.raises(PermissionDenied) as missing:
                list(cl.chat_events(conv_id))
            assert missing.value.reason == "CONVERSATION_NOT_FOUND"
            answer = httpx2.get(
                f"{kv.url}/v1/chat/{conv_id}/events",
                headers={"Authorization": f"Bearer {kv.keys[other]}"},
            )
            assert answer.status_code == 404
            started = list(cl.chat("hello", conversation_id=conv_id))
            assert started[0]["conversationId"] != conv_id
            assert started[0]["sequence"] == 1
    with Client(kv.url, kv.keys["app"]) as app:
        again = list(app.chat("hello again", conversation_id=conv_id))
    assert again[0]["conversationId"] == conv_id
    assert again[0]["sequence"] == events[-1]["sequence"] + 1


def test_a_conversation_forgotten_in_memory_is_served_from_the_store(kv: Live) -> None:
    """As after a restart or on another replica: the hub's memory no longer has it."""
    with Client(kv.url, kv.keys["app"]) as app:
        events = list(app.chat("hello"))
        conv_id = events[0]["conversationId"]
        task = kv.hub.conversations[conv_id].task
        _wait(lambda: task is not None and task.done(), "the turn's last write")
        del kv.hub.conversations[conv_id]
        assert list(app.chat_events(conv_id)) == events
        assert list(app.chat_events(conv_id, after=events[1]["sequence"])) == events[2:]
        again = list(app.chat("hello again", conversation_id=conv_id))
    assert again[0]["conversationId"] == conv_id
    assert again[0]["sequence"] == events[-1]["sequence"] + 1
    assert [m.text for m in kv.hub.conversations[conv_id].history] == [
        "hello",
        "Hello from the script.",
        "hello again",
        "Hello from the script.",
    ]
    with Client(kv.url, kv.keys["alice"]) as alice, pytest.raises(PermissionDenied) as missing:
        list(alice.chat_events(conv_id))
    assert missing.value.reason == "CONVERSATION_NOT_FOUND"
