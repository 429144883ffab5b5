"""Authorization in the Elsa seed's order: tenant, RBAC, ownership, danger, enablement,
agent scope, then the task rules. Stacked failing checks: the earliest in the order answers;
lifting it lets the next one answer. Hooks get read-only arguments; cache hits are audited."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from charter.contracts.model import Danger, contract_or_raise
from charter.kernel.authorize import (
    ORDER,
    AuthorizationInput,
    Denial,
    Enablement,
    authorize,
)
from charter.kernel.contexts import OfferedTool, ResolvedContext
from charter.kernel.envelope import CallStatus
from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.settings import Mode, ModeScopes
from tests.kernel.conftest import APP
from tests.kernel.test_policies import kernel_with

pytestmark = pytest.mark.anyio

CONTRACT = contract_or_raise(
    {
        "id": "a.b",
        "description": "d",
        "effect": "write",
        "danger": "high",
        "permissions": ["a:write"],
        "agent_scopes": ["other"],
    }
)


def _inp(
    *, perms: frozenset[str], args: dict[str, Any], max_danger: Danger, enabled: bool
) -> AuthorizationInput:
    ctx = ResolvedContext(
        context_id="ctx-1",
        run_id="run-1",
        build_digest="sha256:0",
        principal="app",
        tenant="acme",
        kind="application",
        profile="p",
        agent="scout",
        objective=None,
        tools=(OfferedTool(id="a.b", name="a_b", version="1.0.0", digest="d", effect="write"),),
        schema_digest="sha256:0",
        token_estimate=0,
        token_budget=1,
    )
    principal = Principal(
        name="app", tenant="acme", kind=PrincipalKind.APPLICATION, permissions=perms
    )
    return AuthorizationInput(
        principal=principal,
        context=ctx,
        tool="a.b",
        contract=CONTRACT,
        agent_tools=None,
        enablement=Enablement(enabled=frozenset({"a.b"}) if enabled else frozenset()),
        arguments=args,
        max_danger=max_danger,
    )


def test_stacked_failing_checks_answer_in_the_seed_order() -> None:
    owner_denies = True

    def ownership(inp: AuthorizationInput) -> Denial | None:
        return Denial(reason="NOT_OWNER", message="not yours") if owner_denies else None

    stack: dict[str, Any] = {
        "perms": frozenset(),
        "args": {"tenant": "globex"},
        "max_danger": Danger.LOW,
        "enabled": False,
    }

    def answer() -> str | None:
        denial = authorize(_inp(**stack), ownership=[ownership])
        return denial.reason if denial else None

    seen = [answer()]  # every check fails: tenant answers
    stack["args"] = {"tenant": "acme"}
    seen.append(answer())
    stack["perms"] = frozenset({"a:write"})
    seen.append(answer())
    owner_denies = False
    seen.append(answer())
    stack["max_danger"] = Danger.HIGH
    seen.append(answer())
    stack["enabled"] = True
    seen.append(answer())  # the agent scope is last of the chain
    assert seen == [
        "CROSS_TENANT",
        "PERMISSION_MISSING",
        "NOT_OWNER",
        "DANGER_POLICY",
        "TOOL_NOT_ENABLED",
        "AGENT_SCOPE",
    ]
    assert ORDER == ("tenant", "rbac", "ownership", "danger", "enablement", "agent_scope", "task")


def test_a_hook_sees_read_only_arguments_and_cannot_change_them() -> None:
    seen: list[Any] = []

    def rewrite(inp: AuthorizationInput) -> Denial | None:
        seen.append(inp.arguments)
        assert inp.arguments is not None
        inp.arguments["tenant"] = "globex"  # type: ignore[index]
        return None

    args = {"tenant": "acme", "items": [{"k": 1}]}
    inp = _inp(perms=frozenset({"a:write"}), args=args, max_danger=Danger.HIGH, enabled=True)
    denial = authorize(inp, ownership=[rewrite])
    assert denial is not None
    assert denial.reason == "POLICY_ERROR"
    assert isinstance(seen[0], MappingProxyType)
    assert seen[0]["items"] == ({"k": 1},)
    assert isinstance(seen[0]["items"][0], MappingProxyType)
    assert args == {"tenant": "acme", "items": [{"k": 1}]}


async def test_the_kernel_answers_tenant_before_enablement(project: Path) -> None:
    env = await kernel_with(project, enablement=Enablement(disabled=frozenset({"kv.of_tenant"})))
    ctx = await env.kernel.resolve_context(APP, "all")

    async def reason(call_id: str, tenant: str) -> str | None:
        out = await env.kernel.call(
            ctx.context_id, "kv.of_tenant", call_id, {"tenant": tenant, "key": "k"}, principal=APP
        )
        assert out.tool == "kv.of_tenant"  # offered: named, although refused
        return out.error["reason"] if out.error else None

    assert await reason("t1", "globex") == "CROSS_TENANT"  # tenant first, then enablement
    assert await reason("t2", "acme") == "TOOL_DISABLED"


async def test_a_kernel_hook_cannot_change_what_runs(project: Path) -> None:
    def rewrite(inp: AuthorizationInput) -> Denial | None:
        assert inp.arguments is not None
        try:
            inp.arguments["payload"]["x"] = "rewritten"  # type: ignore[index]
        except TypeError:
            return None  # could not: let it through
        return None

    env = await kernel_with(project)
    env.kernel.ownership_hooks = (rewrite,)
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(
        ctx.context_id, "kv.echo", "e1", {"payload": {"x": "original"}}, principal=APP
    )
    assert out.status is CallStatus.SUCCEEDED
    assert out.data == {"x": "original"}


async def test_cache_hits_are_audited_as_cached(project: Path) -> None:
    env = await kernel_with(project)
    ctx = await env.kernel.resolve_context(APP, "all")
    for _ in range(2):
        out = await env.kernel.call(ctx.context_id, "kv.get", "g1", {"key": "a"}, principal=APP)
        assert out.ok
    assert out.metrics.cached
    records = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert [(r["call_id"], r["tool_id"], r["outcome"]) for r in records] == [
        ("g1", "kv.get", "succeeded"),
        ("g1", "kv.get", "cached"),
    ]


async def test_modes_are_scoped_per_tool_agent_and_profile(project: Path) -> None:
    scopes = ModeScopes(
        tools={"kv.critical": Mode.OBSERVE},
        agents={"helper": Mode.OFF},
        profiles={"readers": Mode.OBSERVE},
    )
    env = await kernel_with(project, modes=scopes)
    ctx = await env.kernel.resolve_context(APP, "all")
    # kv.critical is observed: it runs although danger policy denies it, which is recorded
    out = await env.kernel.call(ctx.context_id, "kv.critical", "c1", {}, principal=APP)
    assert out.ok
    started = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_progress" and json.loads(r.data)["payload"].get("stage") == "started"
    ]
    assert started[-1]["mode"] == "observe"
    assert started[-1]["execution_audit"]["would"] == [
        {"phase": "authorization", "reason": "DANGER_POLICY"}
    ]
    # the rest of the profile is enforced
    denied = await env.kernel.call(ctx.context_id, "kv.propose", "n1", {"key": "k"}, principal=APP)
    assert denied.error is not None
    assert denied.error["reason"] == "TOOL_NOT_ENABLED"
    # the helper agent's calls are off: nothing recorded in its run
    helper = await env.kernel.resolve_context(APP, "all", agent="helper")
    off = await env.kernel.call(helper.context_id, "kv.get", "h1", {"key": "a"}, principal=APP)
    assert off.ok
    assert await env.store.head(helper.run_id) is not None  # the context itself
    types = [r.type for r in await env.store.read_stored(helper.run_id)]
    assert "tool_progress" not in types
    assert "tool_call_recorded" not in types
