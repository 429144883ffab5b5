"""What each answer and its audit record name, phase by phase.

A refusal names the tool whenever the context offered it (an unoffered name is never
echoed); the fingerprint once the arguments were accepted; the tool's
version only in the outcome of a dispatched call. These are the fields the call path's
:class:`~charter.kernel.core.Attempt` fills in as the phases pass.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus, Envelope
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import ALICE, APP, KEY, make_kernel
from tests.kernel.test_policies import kernel_with

pytestmark = pytest.mark.anyio

UNDISCLOSED = "(undisclosed)"


async def test_each_refusal_and_outcome_names_what_its_phase_knows(project: Path) -> None:
    env = await kernel_with(project, run_elapsed_budget_s=60.0, context_lifetime_s=120.0)
    ctx = await env.kernel.resolve_context(APP, "all")
    version = env.build.tools["kv.get"].contract.version

    async def call(tool: str, call_id: str, args: Any, **kw: Any) -> Envelope:
        return await env.kernel.call(ctx.context_id, tool, call_id, args, principal=APP, **kw)

    answers = {
        "bad id": await call("kv.get", "has space", {"key": "a"}),
        "u1": await call("no.such.tool", "u1", {}),
        "d1": await call("kv.critical", "d1", {}),
        "n1": await call("kv.propose", "n1", {"key": "k"}),
        "s1": await call("kv.get", "s1", {"key": 1}),
        "o1": await call("kv.get", "o1", {"key": "a"}),
        "o1 again": await call("kv.get", "o1", {"key": "b"}),
        "b1": await call("kv.boom", "b1", {"message": "x"}),
        "p1": await call("kv.put", "p1", {"key": "k", "value": "v"}, approval_id="apr-other"),
    }
    env.clock.advance(timedelta(seconds=61))
    answers["e1"] = await call("kv.get", "e1", {"key": "a"})
    env.clock.advance(timedelta(seconds=60))
    answers["x1"] = await call("kv.get", "x1", {"key": "a"})

    statuses = {k: (a.status, a.error["reason"] if a.error else None) for k, a in answers.items()}
    assert statuses == {
        "bad id": (CallStatus.REJECTED, "CALL_ID_INVALID"),
        "u1": (CallStatus.DENIED, "TOOL_NOT_DISCLOSED"),
        "d1": (CallStatus.DENIED, "DANGER_POLICY"),
        "n1": (CallStatus.DENIED, "TOOL_NOT_ENABLED"),
        "s1": (CallStatus.REJECTED, "ARGS_SCHEMA_MISMATCH"),
        "o1": (CallStatus.SUCCEEDED, None),
        "o1 again": (CallStatus.CONFLICT, "IDEMPOTENCY_CONFLICT"),
        "b1": (CallStatus.FAILED, "TOOL_RAISED"),
        "p1": (CallStatus.PENDING_APPROVAL, None),
        "e1": (CallStatus.DENIED, "RUN_TIME_BUDGET_EXCEEDED"),
        "x1": (CallStatus.DENIED, "CONTEXT_EXPIRED"),
    }
    # the answer names the tool whenever the context offered it
    assert {k: a.tool for k, a in answers.items()} == {
        "bad id": "kv.get",
        "u1": None,
        "d1": "kv.critical",
        "n1": "kv.propose",
        "s1": "kv.get",
        "o1": "kv.get",
        "o1 again": "kv.get",
        "b1": "kv.boom",
        "p1": "kv.put",
        "e1": "kv.get",
        "x1": "kv.get",
    }
    assert all(a.context_id == ctx.context_id for a in answers.values())
    assert answers["p1"].warnings == (
        "APPROVAL_MISMATCH: the presented approval is bound to another call",
    )

    records = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    seen = [
        (
            r["call_id"],
            r["outcome"],
            r["tool_id"],
            r["tool_version"],
            r["fingerprint"] is not None,
            r["code"],
            r["reason"],
        )
        for r in records
    ]
    assert seen == [
        ("has space", "rejected", "kv.get", None, False, "invalid_input", "CALL_ID_INVALID"),
        ("u1", "denied", UNDISCLOSED, None, False, "permission_denied", "TOOL_NOT_DISCLOSED"),
        ("d1", "denied", "kv.critical", None, True, "permission_denied", "DANGER_POLICY"),
        ("n1", "denied", "kv.propose", None, True, "permission_denied", "TOOL_NOT_ENABLED"),
        ("s1", "rejected", "kv.get", None, False, "invalid_input", "ARGS_SCHEMA_MISMATCH"),
        ("o1", "succeeded", "kv.get", version, True, None, None),
        ("o1", "conflict", "kv.get", None, True, "invalid_input", "IDEMPOTENCY_CONFLICT"),
        ("b1", "failed", "kv.boom", version, True, "internal", "TOOL_RAISED"),
        ("p1", "approval_mismatch", "kv.put", None, True, None, "APPROVAL_MISMATCH"),
        ("e1", "denied", "kv.get", None, True, "resource_limit", "RUN_TIME_BUDGET_EXCEEDED"),
        ("x1", "denied", "kv.get", None, False, "permission_denied", "CONTEXT_EXPIRED"),
    ]
    assert all(r["actor"] == "app" and r["tenant"] == "acme" for r in records)
    mismatch = next(r for r in records if r["outcome"] == "approval_mismatch")
    assert mismatch["duration_ms"] == 0.0


class _Records:
    """An audit sink that keeps what it is handed."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    async def record(self, record: Any) -> None:
        self.records.append(record.to_dict())

    def of(self, call_id: str) -> list[tuple[str, str | None]]:
        return [(r["outcome"], r["actor"]) for r in self.records if r["call_id"] == call_id]


async def test_approvals_and_resolutions_reach_the_audit_sinks(project: Path) -> None:
    """A requested approval, each decision and an operator's resolution are audit records
    too, not only the calls' own answers; none of them carries an argument value."""
    sink = _Records()
    clock = FakeClock(step=timedelta(0))
    kernel = make_kernel(project, MemoryStore(key=KEY, clock=clock), clock, audit=sink)
    ctx = await kernel.resolve_context(APP, "all")
    put = {"key": "k", "value": "secret-value-7"}

    first = await kernel.call(ctx.context_id, "kv.put", "w1", put, principal=APP)
    assert first.status is CallStatus.PENDING_APPROVAL
    assert first.approval is not None
    await kernel.call(ctx.context_id, "kv.put", "w1", put, principal=APP)  # still waiting
    await kernel.decide(first.approval["id"], approve=True, principal=ALICE, reason="fine")
    done = await kernel.call(ctx.context_id, "kv.put", "w1", put, principal=APP)
    assert done.status is CallStatus.SUCCEEDED
    assert sink.of("w1") == [
        ("pending_approval", "app"),
        ("pending_approval", "app"),
        ("approved", "alice"),
        ("succeeded", "app"),
    ]
    requested = [r for r in sink.records if r["outcome"] == "pending_approval"]
    assert [r["details"]["requested"] for r in requested] == [True, False]
    assert {r["details"]["approval_id"] for r in requested} == {first.approval["id"]}
    approved = next(r for r in sink.records if r["outcome"] == "approved")
    assert approved["details"]["requested_by"] == "app"
    assert approved["details"]["note"] == "fine"
    assert approved["tool"] == "kv.put"
    assert approved["fingerprint"].startswith("hmac-sha256:")

    second = await kernel.call(ctx.context_id, "kv.put", "w2", put, principal=APP)
    assert second.approval is not None
    await kernel.decide(second.approval["id"], approve=False, principal=ALICE)
    assert sink.of("w2")[-1] == ("approval_rejected", "alice")

    async def slow() -> Any:
        return await kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.5}, principal=APP)

    task = asyncio.create_task(slow())
    while (
        not (project / "journal.txt").exists()
        or "kv.slow" not in (project / "journal.txt").read_text()
    ):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await kernel.resolve_call(
        ctx.context_id, "s1", outcome="failed", reason="checked upstream", operator=ALICE
    )
    assert sink.of("s1")[-1] == ("resolved", "alice")
    resolved = next(r for r in sink.records if r["outcome"] == "resolved")
    assert resolved["details"] == {"outcome": "failed", "note": "checked upstream"}
    assert "secret-value-7" not in json.dumps(sink.records)
