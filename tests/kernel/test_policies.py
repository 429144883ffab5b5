"""The rest of the refusals: pure authorization hooks, kill switch, disabled tools, run
budgets, observe and off modes, audit sinks, tenant-safe attachments."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.contracts.model import Danger, contract_or_raise
from charter.kernel.audit import JsonlAuditSink
from charter.kernel.authorize import (
    AuthorizationInput,
    Denial,
    Enablement,
    agent_scope,
    authorize,
)
from charter.kernel.contexts import FileContextProvider, OfferedTool, ResolvedContext
from charter.kernel.envelope import CallStatus
from charter.kernel.settings import KernelSettings, Mode, ModeScopes
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import APP, INTRUDER, KEY, Env, make_kernel

pytestmark = pytest.mark.anyio


def _ctx(agent: str | None = None, *tools: OfferedTool) -> ResolvedContext:
    return ResolvedContext(
        context_id="ctx-1",
        run_id="run-1",
        build_digest="sha256:0",
        principal="app",
        tenant="acme",
        kind="application",
        profile="p",
        agent=agent,
        objective=None,
        tools=tools,
        schema_digest="sha256:0",
        token_estimate=0,
        token_budget=1,
    )


def test_agent_scope_hook_denies_other_agents() -> None:
    contract = contract_or_raise({"id": "a.b", "description": "d", "agent_scopes": ["helper"]})
    inp = AuthorizationInput(
        principal=APP,
        context=_ctx("other"),
        tool="a.b",
        contract=contract,
        agent_tools=None,
        enablement=Enablement(),
    )
    denial = agent_scope(inp)
    assert denial is not None
    assert denial.reason == "AGENT_SCOPE"
    assert agent_scope(replace(inp, context=_ctx("helper"))) is None


def test_with_arguments_keeps_every_other_field() -> None:
    """The hot path's copy of the input (instead of ``dataclasses.replace``) drops nothing,
    whatever fields the input gains."""
    contract = contract_or_raise({"id": "a.b", "description": "d"})
    inp = AuthorizationInput(
        principal=APP,
        context=_ctx("helper"),
        tool="a.b",
        contract=contract,
        agent_tools=frozenset({"a.b"}),
        enablement=Enablement(kill_switch=True),
        max_danger=Danger.LOW,
    )
    arguments = {"tenant": "acme"}
    assert inp.with_arguments(arguments) == replace(inp, arguments=arguments)


def test_a_hook_that_raises_denies() -> None:
    contract = contract_or_raise({"id": "a.b", "description": "d"})
    ctx = _ctx(None, OfferedTool(id="a.b", name="a_b", version="1.0.0", digest="d", effect="read"))
    inp = AuthorizationInput(
        principal=APP,
        context=ctx,
        tool="a.b",
        contract=contract,
        agent_tools=None,
        enablement=Enablement(),
    )

    def broken(_: AuthorizationInput) -> Denial | None:
        raise RuntimeError("policy service down")

    denial = authorize(inp, ownership=[broken])
    assert denial is not None
    assert denial.reason == "POLICY_ERROR"


async def kernel_with(project: Path, **settings: Any) -> Env:
    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    base = KernelSettings(
        enablement=Enablement(enabled=frozenset({"kv.put"})), read_retry_backoff_s=0.0
    )
    kernel = make_kernel(project, store, clock, settings=replace(base, **settings))
    return Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)


async def _reason(env: Env, tool: str, args: Any, call_id: str = "c1") -> str | None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    out = await env.kernel.call(cid, tool, call_id, args, principal=APP)
    return out.error["reason"] if out.error else None


async def test_kill_switch_and_disabled_tools(project: Path) -> None:
    env = await kernel_with(project, enablement=Enablement(kill_switch=True))
    assert await _reason(env, "kv.get", {"key": "a"}) == "KILL_SWITCH"
    env = await kernel_with(project, enablement=Enablement(disabled=frozenset({"kv.get"})))
    assert await _reason(env, "kv.get", {"key": "a"}) == "TOOL_DISABLED"
    env = await kernel_with(project, enablement=Enablement())
    assert await _reason(env, "kv.put", {"key": "a", "value": "b"}) == "TOOL_NOT_ENABLED"


async def test_run_call_budget(project: Path) -> None:
    env = await kernel_with(project, run_call_budget=2)
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    for i in range(2):
        assert (await env.kernel.call(cid, "kv.get", f"c{i}", {"key": "a"}, principal=APP)).ok
    out = await env.kernel.call(cid, "kv.get", "c3", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert out.error["reason"] == "RUN_CALL_BUDGET_EXCEEDED"
    assert env.runs_of("kv.get") == 2


async def test_run_elapsed_budget(project: Path) -> None:
    env = await kernel_with(project, run_elapsed_budget_s=60.0, context_lifetime_s=3600.0)
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    assert (await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)).ok
    env.clock.advance(timedelta(seconds=61))
    out = await env.kernel.call(cid, "kv.get", "c2", {"key": "a"}, principal=APP)
    assert out.error is not None
    assert out.error["code"] == "resource_limit"
    assert out.error["reason"] == "RUN_TIME_BUDGET_EXCEEDED"


async def test_observe_mode_keeps_write_approvals_unless_a_tool_is_named(project: Path) -> None:
    env = await kernel_with(project, mode=Mode.OBSERVE, enablement=Enablement())
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(
        ctx.context_id, "kv.put", "p1", {"key": "a", "value": "b"}, principal=APP
    )
    # not enabled: recorded, let through; the approval a write needs is still asked for
    assert out.status is CallStatus.PENDING_APPROVAL
    assert env.runs_of("kv.put") == 0


async def test_observe_mode_runs_and_records_what_enforce_would_do(project: Path) -> None:
    scopes = ModeScopes(observe_without_approval=frozenset({"kv.put"}))
    env = await kernel_with(project, mode=Mode.OBSERVE, enablement=Enablement(), modes=scopes)
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(
        ctx.context_id, "kv.put", "p1", {"key": "a", "value": "b"}, principal=APP
    )
    assert out.ok  # named by the deployment: ran without approval, although not enabled
    assert env.runs_of("kv.put") == 1
    started = [
        json.loads(r.data)
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_progress"
    ]
    would = started[0]["payload"]["execution_audit"]["would"]
    assert {w["reason"] for w in would} == {"TOOL_NOT_ENABLED", "APPROVAL_REQUIRED"}
    bad = await env.kernel.call(ctx.context_id, "kv.get", "g1", '{"key": 1}', principal=APP)
    assert bad.status is CallStatus.REJECTED


async def test_off_mode_records_nothing(project: Path) -> None:
    env = await kernel_with(project, mode=Mode.OFF)
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", "g1", {"key": "a"}, principal=APP)
    assert out.ok
    assert await env.store.head(ctx.run_id) is None
    assert env.runs_of("kv.get") == 1


async def test_audit_jsonl_sink_records_success_failure_and_denial(
    project: Path, tmp_path: Path
) -> None:
    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    kernel = make_kernel(project, store, clock, audit=sink)
    cid = (await kernel.resolve_context(APP, "all")).context_id
    await kernel.call(cid, "kv.get", "ok1", {"key": "a"}, principal=APP)
    await kernel.call(cid, "kv.boom", "bad1", {"message": "x"}, principal=APP)
    await kernel.call(cid, "kv.critical", "den1", {}, principal=APP)
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    by_call = {line["call_id"]: line for line in lines}
    assert by_call["ok1"]["outcome"] == "succeeded"
    assert by_call["bad1"]["outcome"] == "failed"
    assert by_call["den1"]["outcome"] == "denied"
    assert by_call["den1"]["reason"] == "DANGER_POLICY"
    assert all(line["actor"] == "app" and line["tenant"] == "acme" for line in lines)
    assert by_call["ok1"]["fingerprint"].startswith("hmac-sha256:")


async def test_attachments_resolve_only_within_the_tenant(project: Path) -> None:
    docs = project / "context"
    (docs / "acme").mkdir(parents=True)
    (docs / "globex").mkdir(parents=True)
    (docs / "acme" / "intro.md").write_text("acme intro")
    (docs / "globex" / "plans.md").write_text("globex secret plans")
    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock, providers={"docs": FileContextProvider(docs)})
    ctx = await kernel.resolve_context(
        APP, "all", attachments=[("docs", "intro"), ("docs", "plans"), ("docs", "../globex/plans")]
    )
    assert [a.ref for a in ctx.attachments] == ["intro"]
    assert ctx.attachments[0].content == "acme intro"
    assert set(ctx.unresolved) == {"docs:plans", "docs:../globex/plans"}
    other = await kernel.resolve_context(INTRUDER, "readers", attachments=[("docs", "plans")])
    assert other.attachments[0].content == "globex secret plans"


async def test_contexts_join_only_runs_of_the_same_tenant(project: Path) -> None:
    from charter.errors import PermissionDenied
    from charter.ledger.events import NewEvent

    env = await kernel_with(project)
    mine = await env.kernel.resolve_context(APP, "all")
    again = await env.kernel.resolve_context(APP, "readers", run_id=mine.run_id)
    assert again.run_id == mine.run_id
    with pytest.raises(PermissionDenied) as info:
        await env.kernel.resolve_context(INTRUDER, "readers", run_id=mine.run_id)
    assert info.value.reason == "RUN_NOT_FOUND"
    # a run created for another tenant and holding no context yet is refused too
    await env.store.append(
        "adhoc-000000000001",
        [
            NewEvent(
                type="run_created",
                payload={"session_id": "s", "workflow_slug": "adhoc", "tenant": "globex"},
            )
        ],
    )
    with pytest.raises(PermissionDenied):
        await env.kernel.resolve_context(APP, "readers", run_id="adhoc-000000000001")


async def test_rows_with_equal_times_verify(project: Path, tmp_path: Path) -> None:
    """Projection lists break ties by key, identically in the stores and in the rebuild."""
    from charter.ledger.verify import verify_run
    from charter.stores.sqlite import SQLiteStore

    clock = FakeClock(step=timedelta(0))  # every timestamp equal
    async with SQLiteStore.open(tmp_path / "ties.db", key=KEY, clock=clock) as store:
        kernel = make_kernel(project, store, clock)
        first = await kernel.resolve_context(APP, "all")
        for _ in range(5):
            await kernel.resolve_context(APP, "readers", run_id=first.run_id)
        report = await verify_run(store, first.run_id, KEY)
        assert report.ok, report


async def test_ledger_audit_records_carry_the_error_code(project: Path) -> None:
    env = await kernel_with(project)
    ctx = await env.kernel.resolve_context(APP, "all")
    await env.kernel.call(ctx.context_id, "kv.boom", "b1", {"message": "x"}, principal=APP)
    records = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert [(r["outcome"], r["code"], r["reason"]) for r in records] == [
        ("failed", "internal", "TOOL_RAISED")
    ]
