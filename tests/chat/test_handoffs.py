"""Handoffs in a chat (the delegation guard): a handoff to a role creates the ad-hoc task,
records the handoff and starts it; the role's calls are governed inside the task; the end of
the turn completes it, or fails it when the role's work failed; refused handoffs leave no
task; tasks a lost turn left running fail when the next turn starts. Through the library,
on a real SQLite store, with the scripted model."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from charter.ledger.events import NewEvent
from charter.ledger.verify import verify_run
from charter.proof.disclosure import compare
from charter.proposals import ProposalService, load_proposal_settings
from charter.providers import ChatRequest, Orchestrator, ScriptedProvider
from charter.runtime import Runtime, ledger_key_for, open_runtime
from tests.kernel._project import write_runtime_project

pytestmark = pytest.mark.anyio

AGENTS = """
agents:
  coordinator:
    instructions: "Coordinate; hand reading work to the analyst."
    tools: [kv.echo]
    handoffs: [analyst]
  analyst:
    instructions: "Read keys."
    tools: [kv.get, kv.slow]
"""

SCRIPT = """
rules:
  - match: "(?i)^delegate"
    steps:
      - say: "Handing off."
      - call:
          id: h1
          tool: charter_handoff
          arguments:
            role: analyst
            objective: "ANALYST read the color"
            constraints: ["read only"]
            budget: {max_tool_calls: 3}
      - say: "Analyst: {{h1.data.answer}}"
  - match: "^ANALYST"
    steps:
      - call: {id: g1, tool: kv_get, arguments: {key: color}}
      - say: "color read: {{g1.status}}"
  - match: "(?i)^refuse"
    steps:
      - call: {id: r1, tool: charter_handoff, arguments: {role: analyst, objective: "x",
                                                         history: ["the whole chat"]}}
      - call: {id: r2, tool: charter_handoff, arguments: {role: writer, objective: "x"}}
      - call: {id: r3, tool: charter_handoff,
               arguments: {role: analyst, objective: "x", budget: {max_tool_calls: 9999}}}
      - call: {id: r4, tool: charter_handoff,
               arguments: {role: analyst, objective: "x", input_artifact_ids: [art-nope]}}
      - say: "refused"
  - match: "(?i)^break"
    steps:
      - call: {id: b1, tool: charter_handoff, arguments: {role: analyst, objective: "BROKEN"}}
      - say: "after"
  - match: "(?i)^dawdle"
    steps:
      - call: {id: d1, tool: charter_handoff,
               arguments: {role: analyst, objective: "SLOWROLE", budget: {timeout_seconds: 1}}}
      - say: "after"
  - match: "(?i)^leaky"
    steps:
      - call: {id: e1, tool: kv_echo, arguments: {payload: {api_key: "sk-handoff-Qx81-private"}}}
      - call:
          id: h2
          tool: charter_handoff
          arguments:
            role: analyst
            objective: "ANALYST check key sk-handoff-Qx81-private"
            constraints: ["never log sk-handoff-Qx81-private"]
      - say: "done"
  - match: "^SLOWROLE"
    steps:
      - call: {id: s1, tool: kv_slow, arguments: {seconds: 3}}
  - match: "^BROKEN"
    steps:
      - error: rate_limited
  - match: ""
    steps: [{say: "hello"}]
"""


def _project(root: Path) -> Path:
    write_runtime_project(root)
    yaml = root / "charter.yaml"
    yaml.write_text(yaml.read_text() + textwrap.dedent(AGENTS))
    yaml.write_text(yaml.read_text().replace("include: [kv.get,", "include: [kv.get, kv.echo,", 1))
    return root


async def _turn(orch: Orchestrator, rt: Runtime, message: str) -> list[dict[str, Any]]:
    request = ChatRequest(
        conversation_id="conv-h",
        principal=rt.principal("app"),
        message=message,
        profile="all",
        agent="coordinator",
        run_id=getattr(orch, "_test_run", None),
    )
    events = [e.to_dict() async for e in orch.execute_chat(request)]
    orch._test_run = events[0]["data"]["runId"]  # type: ignore[attr-defined]
    return events


def _of(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == type_]


async def test_a_handoff_creates_starts_and_completes_an_adhoc_task(tmp_path: Path) -> None:
    root = _project(tmp_path / "kv")
    (root / "script.yaml").write_text(textwrap.dedent(SCRIPT))
    async with open_runtime(root) as rt:
        proposals = ProposalService(rt, load_proposal_settings(rt.deployment.source))
        orch = Orchestrator(
            rt, provider=ScriptedProvider.from_file(root / "script.yaml"), proposals=proposals
        )
        events = await _turn(orch, rt, "delegate the reading")
        run_id = events[0]["data"]["runId"]
        assert "charter_handoff" not in events[0]["data"]["tools"]  # not a governed tool
        (started,) = _of(events, "task.started")
        assert started["role"] == "analyst"
        assert started["tools"] == ["kv_get", "kv_slow"]
        task_id = started["taskId"]
        inner = [r for r in _of(events, "tool.result") if r["tool"] == "kv_get"]
        assert inner == [
            {
                "callId": inner[0]["callId"],
                "tool": "kv_get",
                "status": "succeeded",
                "error": None,
                "bytes": inner[0]["bytes"],
                "taskId": task_id,
            }
        ]
        handoff_result = [r for r in _of(events, "tool.result") if r["tool"] == "charter_handoff"]
        assert handoff_result[0]["status"] == "succeeded"
        assert _of(events, "task.ended") == [{"taskId": task_id, "status": "completed"}]
        assert "color read: succeeded" in _of(events, "assistant.completed")[-1]["text"]
        assert events[-1]["data"]["status"] == "completed"

        (task,) = await rt.tasks(run_id)
        assert (task.task_id, task.role, task.profile, task.status) == (
            task_id,
            "analyst",
            "all",
            "completed",
        )
        (handoff,) = task.handoffs
        assert handoff["sender_role"] == "coordinator"
        assert handoff["receiver_role"] == "analyst"
        assert handoff["capabilities"] == ["kv.get", "kv.slow"]
        assert handoff["budget"]["max_tool_calls"] == 3
        assert handoff["constraints"] == ["read only"]
        calls = [c for c in await rt.calls(tenant="acme", limit=1000) if c.run_id == run_id]
        assert [(c.tool_id, c.task_id) for c in calls] == [("kv.get", task_id)]
        types = [e.type for e in await rt.events(run_id, limit=10_000)]
        at = types.index("task_created")
        assert types[at : at + 3] == ["task_created", "handoff_recorded", "task_status_changed"]

        # every model request was reported as a disclosure, the role's in its own context;
        # the orchestrator's handoff tool is not a governed tool and is not reported
        doc = compare(run_id, await rt.events(run_id, limit=10_000)).to_dict()
        assert doc["flagged"] is False, doc
        by_agent = {c["agent"]: c["reports"] for c in doc["contexts"]}
        assert len(by_agent["coordinator"]) == 2  # the first request, and after the handoff
        assert {t["id"] for r in by_agent["coordinator"] for t in r["tools"]} == {"kv.echo"}
        assert len(by_agent["analyst"]) == 2
        assert [t["id"] for t in by_agent["analyst"][0]["tools"]] == ["kv.get", "kv.slow"]
        assert all(r["source"] == "chat" and r["tokens"] > 0 for r in by_agent["analyst"])
        assert all(r["tokens_estimated"] for r in by_agent["analyst"])

        # the kernel keeps the task's rules: a finished task takes no more calls, and the
        # coordinator's context cannot call inside the analyst's task
        member = await rt.resolve_context("app", "all", agent="analyst", run_id=run_id)
        late = await rt.call(
            member.context_id, "kv.get", "late-1", {"key": "a"}, as_="app", task_id=task_id
        )
        assert late.status is CallStatus.DENIED
        assert late.error is not None
        assert late.error["reason"] == "TASK_NOT_RUNNING"

        # refused handoffs: each a rejected tool result with its reason, no task created
        events = await _turn(orch, rt, "refuse these")
        reasons = [
            r["error"]["reason"] for r in _of(events, "tool.result") if r["status"] == "rejected"
        ]
        assert reasons == [
            "HANDOFF_FORBIDDEN_KEY",
            "HANDOFF_WRONG_RECEIVER",
            "HANDOFF_BUDGET_INVALID",
            "HANDOFF_INPUT_UNKNOWN",
        ]
        assert len(await rt.tasks(run_id)) == 1

        # the role's work fails: the task fails when the turn ends
        events = await _turn(orch, rt, "break it")
        (ended,) = _of(events, "task.ended")
        assert ended["status"] == "failed"
        broken = {t.task_id: t for t in await rt.tasks(run_id)}[ended["taskId"]]
        assert broken.status == "failed"
        assert broken.error["details"]["reason"] == "PROVIDER_rate_limited"

        # the handoff's time budget bounds the role's turn: the task fails TASK_TIMEOUT and
        # the call it interrupted ends with an outcome, never left dispatching
        events = await _turn(orch, rt, "dawdle")
        (ended,) = _of(events, "task.ended")
        slow = {t.task_id: t for t in await rt.tasks(run_id)}[ended["taskId"]]
        assert slow.status == "failed"
        assert slow.error["details"]["reason"] == "TASK_TIMEOUT"
        slow_calls = [
            c for c in await rt.calls(tenant="acme", limit=1000) if c.tool_id == "kv.slow"
        ]
        assert len(slow_calls) == 1
        assert slow_calls[0].state in {"cancelled", "unknown"}  # settled, not dispatching

        # a task a lost turn left running fails (TURN_LOST) when the next turn starts
        await rt.record(
            run_id,
            [
                NewEvent(
                    type="task_created",
                    payload={"task_id": "orphan", "role": "analyst", "profile": "all"},
                ),
                NewEvent(
                    type="handoff_recorded",
                    payload={"task_id": "orphan", "handoff_id": "handoff-1", "objective": "o"},
                ),
                NewEvent(
                    type="task_status_changed",
                    payload={"task_id": "orphan", "status": "running", "handoff_id": "handoff-1"},
                ),
            ],
        )
        events = await _turn(orch, rt, "hello")
        assert {"taskId": "orphan", "status": "failed", "reason": "TURN_LOST"} in _of(
            events, "task.ended"
        )
        assert {t.task_id: t.status for t in await rt.tasks(run_id)}["orphan"] == "failed"

        report = await verify_run(rt.store, run_id, ledger_key_for(root))
        assert report.ok, report


async def test_adhoc_task_rules_in_the_kernel(tmp_path: Path) -> None:
    root = _project(tmp_path / "kv")
    async with open_runtime(root) as rt:
        coord = await rt.resolve_context("app", "all", agent="coordinator")
        run_id = coord.run_id
        analyst = await rt.resolve_context("app", "all", agent="analyst", run_id=run_id)
        await rt.record(
            run_id,
            [
                NewEvent(
                    type="task_created",
                    payload={"task_id": "t1", "role": "analyst", "profile": "all"},
                ),
                NewEvent(
                    type="handoff_recorded",
                    payload={
                        "task_id": "t1",
                        "handoff_id": "handoff-1",
                        "capabilities": ["kv.get"],
                        "budget": {"max_tool_calls": 1, "timeout_seconds": 300},
                    },
                ),
                NewEvent(
                    type="task_status_changed",
                    payload={"task_id": "t1", "status": "running", "handoff_id": "handoff-1"},
                ),
            ],
        )

        async def reason(ctx_id: str, tool: str, call_id: str, args: dict[str, Any]) -> Any:
            env = await rt.call(ctx_id, tool, call_id, args, as_="app", task_id="t1")
            return env.error["reason"] if env.error else env.status.value

        assert await reason(coord.context_id, "kv.echo", "c1", {"payload": {}}) == (
            "TASK_ROLE_MISMATCH"
        )
        assert await reason(analyst.context_id, "kv.get", "c2", {"key": "a"}) == "succeeded"
        assert await reason(analyst.context_id, "kv.get", "c3", {"key": "a"}) == (
            "TASK_CALL_BUDGET_EXHAUSTED"
        )
        assert await reason(analyst.context_id, "kv.get", "c4", {"key": "a"}) == (
            "TASK_CALL_BUDGET_EXHAUSTED"
        )
        env = await rt.call(
            analyst.context_id, "kv.get", "c5", {"key": "a"}, as_="app", task_id="nope"
        )
        assert env.error is not None
        assert env.error["reason"] == "TASK_NOT_FOUND"


async def test_a_handoff_is_recorded_without_the_secrets_the_turns_calls_took(
    tmp_path: Path,
) -> None:
    """The coordinator passed a secret to a tool under a sensitive key, then wrote it into a
    handoff's objective and constraints: the handoff is recorded (event, task row) without
    it — the turn learned it from the call — and the SQLite file holds it nowhere."""
    secret = "sk-handoff-Qx81-private"
    root = _project(tmp_path / "kv")
    (root / "script.yaml").write_text(textwrap.dedent(SCRIPT))
    async with open_runtime(root) as rt:
        proposals = ProposalService(rt, load_proposal_settings(rt.deployment.source))
        orch = Orchestrator(
            rt, provider=ScriptedProvider.from_file(root / "script.yaml"), proposals=proposals
        )
        events = await _turn(orch, rt, "leaky handoff")
        run_id = events[0]["data"]["runId"]
        assert _of(events, "task.ended")[0]["status"] == "completed", events
        (task,) = await rt.tasks(run_id)
        (handoff,) = task.handoffs
        assert handoff["objective"] == "ANALYST check key [REDACTED]"
        assert handoff["constraints"] == ["never log [REDACTED]"]
        recorded = [e.payload for e in await rt.events(run_id, limit=10_000)]
    assert secret not in str(recorded)
    for db in (root / ".charter").glob("charter.db*"):
        assert secret.encode() not in db.read_bytes(), db.name
