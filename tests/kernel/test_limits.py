"""Limits a shared deployment needs: rate and concurrency per principal, tenant and tool,
pending-approval caps, and deadlines on ownership hooks — on the memory and SQLite stores.
(Two replicas sharing PostgreSQL: ``tests/kernel/test_limits_postgres.py`` and, as two
``charter serve`` processes, ``tests/server/test_limits_replicas.py``.)"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import anyio
import pytest

from charter.kernel.authorize import AuthorizationInput, Denial, Enablement
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.limits import Limiter, LimitSettings, ProcessLimitState, Rate
from charter.kernel.settings import KernelSettings
from tests.kernel.conftest import ALICE, APP, BOB, INTRUDER, Env, make_kernel

pytestmark = pytest.mark.anyio

BASE = KernelSettings(
    enablement=Enablement(enabled=frozenset({"kv.put"})), read_retry_backoff_s=0.0
)


def limited(env: Env, settings: LimitSettings) -> Limiter:
    limiter = Limiter(settings, ProcessLimitState())
    env.kernel.limiter = limiter
    return limiter


async def flood(env: Env, who: Any, tool: str, args: Any, n: int, tag: str) -> list[Envelope]:
    ctx = (await env.kernel.resolve_context(who, "all")).context_id
    out: list[Envelope] = []

    async def one(i: int) -> None:
        out.append(await env.kernel.call(ctx, tool, f"{tag}-{i}", args, principal=who))

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return out


def reasons(envelopes: list[Envelope]) -> dict[str | None, int]:
    found: dict[str | None, int] = {}
    for env in envelopes:
        reason = env.error["reason"] if env.error else None
        found[reason] = found.get(reason, 0) + 1
    return found


async def audited(env: Env, reason: str) -> int:
    count = 0
    for run in await env.store.list_runs(limit=100):
        for row in await env.store.read_stored(run.run["run_id"]):
            if row.type == "tool_call_recorded":
                count += json.loads(row.data)["payload"].get("reason") == reason
    return count


async def test_a_flood_from_one_principal_is_cut_at_its_rate_while_another_passes(
    env: Env,
) -> None:
    limiter = limited(env, LimitSettings(rate_principal=Rate(per_s=0.01, burst=5)))
    out = await flood(env, APP, "kv.get", {"key": "a"}, 40, "f")
    assert reasons(out) == {None: 5, "RATE_LIMITED": 35}
    refused = [e for e in out if e.error]
    assert all(e.status is CallStatus.DENIED for e in refused)
    assert all(e.error is not None and e.error["code"] == "resource_limit" for e in refused)
    assert all(e.error is not None and e.error["retryable"] for e in refused)
    assert all(e.error is not None and 0 < e.error["retry_after"] <= 100 for e in refused)
    assert env.runs_of("kv.get") == 5  # nothing refused reached the tool
    other = await flood(env, BOB, "kv.get", {"key": "a"}, 3, "b")
    assert reasons(other) == {None: 3}
    assert limiter.refusals == {("RATE_LIMITED", "principal"): 35}
    assert await audited(env, "RATE_LIMITED") == 1  # sampled: one per key and second


async def test_tenant_and_tool_rates(env: Env) -> None:
    limited(
        env,
        LimitSettings(rate_tenant=Rate(per_s=0.01, burst=4), rate_tools={"kv.echo": Rate(0.01, 1)}),
    )
    assert reasons(await flood(env, APP, "kv.echo", {"payload": {}}, 3, "e")) == {
        None: 1,
        "RATE_LIMITED": 2,
    }
    mixed = await flood(env, BOB, "kv.get", {"key": "a"}, 5, "g")
    assert reasons(mixed) == {None: 3, "RATE_LIMITED": 2}  # the tenant's 4 tokens in all
    assert reasons(await flood(env, INTRUDER, "kv.get", {"key": "a"}, 2, "i")) == {None: 2}
    scopes = {e.error["message"].split("'")[0] for e in mixed if e.error}
    assert scopes == {"the tenant"}


async def test_refused_calls_leave_the_bucket_untouched(env: Env) -> None:
    limited(
        env,
        LimitSettings(
            rate_principal=Rate(per_s=0.01, burst=10), rate_tenant=Rate(per_s=0.01, burst=2)
        ),
    )
    await flood(env, APP, "kv.get", {"key": "a"}, 5, "a")
    # the tenant refused three calls: the principal's bucket kept its tokens for them
    state = env.kernel.limiter.state  # type: ignore[union-attr]
    assert state._buckets["principal:acme/app"].tokens == pytest.approx(8.0, abs=0.01)


async def test_concurrency_is_capped_per_principal_and_slots_come_back(env: Env) -> None:
    limiter = limited(env, LimitSettings(concurrency_principal=2))
    slow = {"seconds": 0.4}
    found: dict[str, list[Envelope]] = {}

    async def app() -> None:
        found["app"] = await flood(env, APP, "kv.slow", slow, 6, "s")

    async def bob() -> None:
        await anyio.sleep(0.1)  # while app's two slow calls hold app's slots
        found["bob"] = await flood(env, BOB, "kv.get", {"key": "a"}, 2, "b")

    async with anyio.create_task_group() as tg:
        tg.start_soon(app)
        tg.start_soon(bob)
    assert reasons(found["app"]) == {None: 2, "CONCURRENCY_LIMITED": 4}
    assert all(e.error["retry_after"] > 0 for e in found["app"] if e.error)
    assert reasons(found["bob"]) == {None: 2}
    assert reasons(await flood(env, APP, "kv.get", {"key": "a"}, 2, "after")) == {None: 2}
    assert limiter.refusals == {("CONCURRENCY_LIMITED", "principal"): 4}
    assert ProcessLimitState is type(limiter.state)
    assert limiter.state._inflight == {}  # type: ignore[attr-defined]


async def test_a_failing_call_releases_its_slot(env: Env) -> None:
    limiter = limited(env, LimitSettings(concurrency_tools={"kv.boom": 1}))
    for i in range(3):
        out = await flood(env, APP, "kv.boom", {"message": "no"}, 1, f"x{i}")
        assert out[0].status is CallStatus.FAILED
        assert out[0].error is not None
        assert out[0].error["reason"] == "TOOL_RAISED"
    assert limiter.state._inflight == {}  # type: ignore[attr-defined]


async def test_limits_come_before_validation(env: Env) -> None:
    limited(env, LimitSettings(rate_principal=Rate(per_s=0.01, burst=1)))
    assert reasons(await flood(env, APP, "kv.get", {"key": "a"}, 1, "ok")) == {None: 1}
    bad = await flood(env, APP, "kv.get", '{"key": 1, "key": 2}', 1, "bad")
    assert reasons(bad) == {"RATE_LIMITED": 1}  # not IDEMPOTENCY/INVALID: never parsed


async def test_the_pending_approval_cap_per_tenant_and_principal(env: Env) -> None:
    env.kernel.settings = replace(
        env.kernel.settings, pending_approvals_tenant=3, pending_approvals_principal=2
    )
    writes = [
        await flood(env, APP, "kv.put", {"key": f"k{i}", "value": "v"}, 1, f"w{i}")
        for i in range(3)
    ]
    assert [w[0].status for w in writes] == [
        CallStatus.PENDING_APPROVAL,
        CallStatus.PENDING_APPROVAL,
        CallStatus.DENIED,
    ]
    error = writes[2][0].error
    assert error is not None
    assert (error["code"], error["reason"]) == ("resource_limit", "TOO_MANY_PENDING_APPROVALS")
    assert "principal" in error["message"]
    alice = await flood(env, ALICE, "kv.put", {"key": "a", "value": "v"}, 1, "al")
    assert alice[0].status is CallStatus.PENDING_APPROVAL
    tenant_full = await flood(env, ALICE, "kv.put", {"key": "b", "value": "v"}, 1, "al2")
    assert tenant_full[0].error is not None
    assert tenant_full[0].error["reason"] == "TOO_MANY_PENDING_APPROVALS"
    assert "tenant" in tenant_full[0].error["message"]
    other = await flood(env, INTRUDER, "kv.put", {"key": "a", "value": "v"}, 1, "in")
    assert other[0].status is CallStatus.PENDING_APPROVAL  # another tenant
    assert await audited(env, "TOO_MANY_PENDING_APPROVALS") == 2
    # approvals that expired unanswered no longer count
    env.clock.advance(timedelta(seconds=env.kernel.settings.approval_lifetime_s + 1))
    again = await flood(env, APP, "kv.put", {"key": "n", "value": "v"}, 1, "new")
    assert again[0].status is CallStatus.PENDING_APPROVAL


async def test_a_decided_approval_frees_its_place(env: Env) -> None:
    env.kernel.settings = replace(env.kernel.settings, pending_approvals_principal=1)
    first = await flood(env, APP, "kv.put", {"key": "a", "value": "v"}, 1, "p1")
    assert first[0].approval is not None
    refused = await flood(env, APP, "kv.put", {"key": "b", "value": "v"}, 1, "p2")
    assert refused[0].error is not None
    await env.kernel.decide(first[0].approval["id"], approve=False, principal=ALICE)
    later = await flood(env, APP, "kv.put", {"key": "b", "value": "v"}, 1, "p3")
    assert later[0].status is CallStatus.PENDING_APPROVAL


async def _hooked(env: Env, hook: Any, deadline_s: float = 0.25) -> tuple[Envelope, float]:
    kernel = make_kernel(
        env.project,
        env.store,
        env.clock,
        settings=replace(BASE, policy_hook_deadline_s=deadline_s),
        ownership_hooks=[hook],
    )
    ctx = (await kernel.resolve_context(APP, "all")).context_id
    started = time.perf_counter()
    out = await kernel.call(ctx, "kv.get", "h1", {"key": "a"}, principal=APP)
    return out, time.perf_counter() - started


async def test_a_slow_hook_denies_at_its_deadline(env: Env) -> None:
    def slow(inp: AuthorizationInput) -> Denial | None:
        time.sleep(2)
        return None

    out, elapsed = await _hooked(env, slow)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert (out.error["code"], out.error["reason"]) == ("permission_denied", "POLICY_ERROR")
    assert "250 ms" in out.error["message"]
    assert elapsed < 1.5  # the deadline, not the hook's 2 s (loose: a shared machine)
    assert env.runs_of("kv.get") == 0
    assert await audited(env, "POLICY_ERROR") == 1


async def test_a_slow_async_hook_denies_at_its_deadline(env: Env) -> None:
    async def slow(inp: AuthorizationInput) -> Denial | None:
        await anyio.sleep(2)
        return None

    out, elapsed = await _hooked(env, slow, deadline_s=0.1)
    assert out.error is not None
    assert out.error["reason"] == "POLICY_ERROR"
    assert elapsed < 1.5


@pytest.mark.parametrize("answer", ["allow", True, 0, {"reason": "X"}, ["deny"]])
async def test_a_hook_answering_something_that_is_not_a_decision_denies(
    env: Env, answer: Any
) -> None:
    out, _ = await _hooked(env, lambda inp: answer)
    assert out.error is not None
    assert out.error["reason"] == "POLICY_ERROR"
    assert "not a decision" in out.error["message"]
    assert await audited(env, "POLICY_ERROR") == 1


async def test_hooks_that_answer_in_time_decide(env: Env) -> None:
    out, _ = await _hooked(env, lambda inp: None)
    assert out.status is CallStatus.SUCCEEDED

    async def deny(inp: AuthorizationInput) -> Denial | None:
        return Denial(reason="NOT_OWNER", message="not yours")

    out, _ = await _hooked(env, deny)
    assert out.error is not None
    assert out.error["reason"] == "NOT_OWNER"


async def test_a_cancelled_call_frees_its_slot(env: Env) -> None:
    limiter = limited(env, LimitSettings(concurrency_principal=1))
    ctx = (await env.kernel.resolve_context(APP, "all")).context_id
    with anyio.move_on_after(0.2):
        await env.kernel.call(ctx, "kv.slow", "gone", {"seconds": 1.0}, principal=APP)
    assert limiter.state._inflight == {}  # type: ignore[attr-defined]
    out = await env.kernel.call(ctx, "kv.get", "next", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.SUCCEEDED


async def test_the_cost_of_a_refused_call(env: Env) -> None:
    """Not a timed test: prints what a call refused by a limit costs beside an admitted one
    (docs/deploy.md quotes it). Both are read calls of the same tool in one context."""
    import statistics

    limited(env, LimitSettings(rate_principal=Rate(per_s=1e6, burst=1_000_000)))
    ctx = (await env.kernel.resolve_context(APP, "all")).context_id
    admitted, refused = [], []
    for i in range(200):
        started = time.perf_counter()
        out = await env.kernel.call(ctx, "kv.echo", f"a{i}", {"payload": {}}, principal=APP)
        admitted.append(time.perf_counter() - started)
        assert out.error is None
    limited(env, LimitSettings(rate_principal=Rate(per_s=1e-6, burst=1)))
    await env.kernel.call(ctx, "kv.echo", "first", {"payload": {}}, principal=APP)
    for i in range(200):
        started = time.perf_counter()
        out = await env.kernel.call(ctx, "kv.echo", f"r{i}", {"payload": {}}, principal=APP)
        refused.append(time.perf_counter() - started)
        assert out.error is not None
    print(
        f"\nadmitted call: median {statistics.median(admitted) * 1e6:.0f} µs; refused by a "
        f"limit: median {statistics.median(refused) * 1e6:.0f} µs"
    )
