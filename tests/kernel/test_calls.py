"""The call path: every refusal with its code and reason, receipts, conflicts, acceptance."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from tests.kernel.conftest import ALICE, APP, BOB, INTRUDER, Env

pytestmark = pytest.mark.anyio


async def ctx_for(env: Env, who: Any = APP, profile: str = "all", **kw: Any) -> str:
    return (await env.kernel.resolve_context(who, profile, **kw)).context_id


async def test_read_call_succeeds_and_is_recorded(env: Env) -> None:
    cid = await ctx_for(env)
    out = await env.kernel.call(cid, "kv_get", "c1", '{"key": "a"}', principal=APP)
    assert out.status is CallStatus.SUCCEEDED, out
    assert out.data == {"key": "a", "value": None}
    assert out.metrics.cached is False
    assert out.metrics.attempts == 1
    assert env.runs_of("kv.get") == 1
    ctx = await env.kernel.get_context(cid)
    assert ctx is not None
    row = await env.kernel.get_call(cid, "c1", "acme")
    assert row is not None
    assert row.state == "succeeded"
    assert row.fingerprint.startswith("hmac-sha256:fp-test:")


async def test_repeat_returns_receipt_without_dispatch(env: Env) -> None:
    cid = await ctx_for(env)
    first = await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)
    again = await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert again.status is CallStatus.SUCCEEDED
    assert again.metrics.cached is True
    assert again.data == first.data
    assert env.runs_of("kv.get") == 1


async def test_same_call_id_other_arguments_conflicts(env: Env) -> None:
    cid = await ctx_for(env)
    await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)
    out = await env.kernel.call(cid, "kv.get", "c1", {"key": "b"}, principal=APP)
    assert out.status is CallStatus.CONFLICT
    assert out.error is not None
    assert out.error["reason"] == "IDEMPOTENCY_CONFLICT"
    row = await env.kernel.get_call(cid, "c1", "acme")
    assert row is not None
    assert row.receipt is not None
    assert row.receipt["data"] == {"key": "a", "value": None}
    assert env.runs_of("kv.get") == 1


async def test_key_order_and_integral_floats_are_the_same_call(env: Env) -> None:
    cid = await ctx_for(env)
    await env.kernel.call(cid, "kv.echo", "c1", '{"payload": {"a": 1, "b": 2}}', principal=APP)
    again = await env.kernel.call(
        cid, "kv.echo", "c1", '{"payload": {"b": 2.0, "a": 1}}', principal=APP
    )
    assert again.metrics.cached is True


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"key": "a", "key": "b"}', "ARGS_DUPLICATE_KEY"),
        ('{"key": NaN}', "ARGS_NON_FINITE_NUMBER"),
        ('{"key": "\\ud800"}', "ARGS_LONE_SURROGATE"),
        ('{"key": 1}', "ARGS_SCHEMA_MISMATCH"),
        ('{"key": "a", "extra": 1}', "ARGS_SCHEMA_MISMATCH"),
        ("[1]", "ARGS_NOT_OBJECT"),
        ("{", "ARGS_MALFORMED_JSON"),
    ],
)
async def test_invalid_input_is_rejected_and_reserves_nothing(
    env: Env, raw: str, reason: str
) -> None:
    cid = await ctx_for(env)
    out = await env.kernel.call(cid, "kv.get", "c1", raw, principal=APP)
    assert out.status is CallStatus.REJECTED
    assert out.error is not None
    assert out.error["code"] == "invalid_input"
    assert out.error["reason"] == reason
    assert await env.kernel.get_call(cid, "c1", "acme") is None
    assert env.runs_of("kv.get") == 0
    fixed = await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert fixed.status is CallStatus.SUCCEEDED


async def test_invalid_call_id(env: Env) -> None:
    cid = await ctx_for(env)
    for bad in ("", "x" * 129, "has space", "../x"):
        out = await env.kernel.call(cid, "kv.get", bad, {"key": "a"}, principal=APP)
        assert out.status is CallStatus.REJECTED
        assert out.error is not None
        assert out.error["reason"] == "CALL_ID_INVALID"


async def _denied(env: Env, cid: str, tool: str, args: Any, who: Any, reason: str) -> None:
    out = await env.kernel.call(cid, tool, "d1", args, principal=who)
    assert out.status is CallStatus.DENIED, out
    assert out.error is not None
    assert out.error["code"] == "permission_denied", out.error
    assert out.error["reason"] == reason, out.error


async def test_undisclosed_tools_are_denied_even_if_they_exist(env: Env) -> None:
    cid = await ctx_for(env, profile="readers")
    await _denied(env, cid, "kv.put", {"key": "a", "value": "b"}, APP, "TOOL_NOT_DISCLOSED")
    await _denied(env, cid, "no.such.tool", {}, APP, "TOOL_NOT_DISCLOSED")
    assert env.runs_of("kv.put") == 0


async def test_context_of_another_principal_or_tenant(env: Env) -> None:
    cid = await ctx_for(env)
    await _denied(env, cid, "kv.get", {"key": "a"}, ALICE, "CONTEXT_PRINCIPAL_MISMATCH")
    out = await env.kernel.call(cid, "kv.get", "x", {"key": "a"}, principal=INTRUDER)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert out.error["reason"] == "CONTEXT_NOT_FOUND"
    missing = await env.kernel.call("ctx-000000000000", "kv.get", "x", {"key": "a"}, principal=APP)
    assert missing.error is not None
    assert missing.error["reason"] == "CONTEXT_NOT_FOUND"


async def test_listing_equals_callable_set(env: Env) -> None:
    ctx = await env.kernel.resolve_context(BOB, "all")
    names = {t.id for t in ctx.tools}
    # bob lacks kv:write: kv.put and kv.propose are not even offered
    assert "kv.put" not in names
    assert "kv.get" in names
    await _denied(
        env, ctx.context_id, "kv.put", {"key": "a", "value": "b"}, BOB, "TOOL_NOT_DISCLOSED"
    )


async def test_agent_scope(env: Env) -> None:
    cid = await ctx_for(env, agent="reader_bot")
    ctx = await env.kernel.get_context(cid)
    assert ctx is not None
    assert {t.id for t in ctx.tools} == {"kv.get"}
    await _denied(env, cid, "kv.echo", {"payload": {}}, APP, "TOOL_NOT_DISCLOSED")
    plain = await ctx_for(env)
    # a tool scoped to another agent is not even offered (listing = callable set)
    await _denied(env, plain, "kv.scoped", {}, APP, "TOOL_NOT_DISCLOSED")
    helper = await ctx_for(env, agent="helper")
    out = await env.kernel.call(helper, "kv.scoped", "s1", {}, principal=APP)
    assert out.status is CallStatus.SUCCEEDED


async def test_enablement_and_danger_and_tenancy(env: Env) -> None:
    cid = await ctx_for(env)
    await _denied(env, cid, "kv.propose", {"key": "a"}, APP, "TOOL_NOT_ENABLED")
    await _denied(env, cid, "kv.critical", {}, APP, "DANGER_POLICY")
    await _denied(env, cid, "kv.host", {}, APP, "HOST_SCOPE")


async def test_cross_tenant_argument_is_denied(env: Env) -> None:
    cid = await ctx_for(env)
    await _denied(env, cid, "kv.of_tenant", {"tenant": "globex", "key": "a"}, APP, "CROSS_TENANT")
    own = await env.kernel.call(
        cid, "kv.of_tenant", "t1", {"tenant": "acme", "key": "a"}, principal=APP
    )
    assert own.ok


async def test_call_limit_per_context(env: Env) -> None:
    cid = await ctx_for(env)
    for i in range(2):
        out = await env.kernel.call(cid, "kv.limited", f"l{i}", {"n": i}, principal=APP)
        assert out.ok
    out = await env.kernel.call(cid, "kv.limited", "l3", {"n": 3}, principal=APP)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert out.error["code"] == "resource_limit"
    assert out.error["reason"] == "CALL_LIMIT_EXCEEDED"
    other = await ctx_for(env)
    assert (await env.kernel.call(other, "kv.limited", "l1", {"n": 1}, principal=APP)).ok


async def test_expired_context_fails_closed_but_receipts_stay(env: Env) -> None:
    cid = await ctx_for(env)
    first = await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)
    env.clock.advance(timedelta(seconds=900))
    out = await env.kernel.call(cid, "kv.get", "c2", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert out.error["reason"] == "CONTEXT_EXPIRED"
    again = await env.kernel.call(cid, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert again.metrics.cached is True
    assert again.data == first.data


async def test_tool_exception_is_failed_and_redacted(env: Env) -> None:
    cid = await ctx_for(env)
    out = await env.kernel.call(cid, "kv.boom", "b1", {"message": "it broke"}, principal=APP)
    assert out.status is CallStatus.FAILED
    assert out.error is not None
    assert out.error["reason"] == "TOOL_RAISED"
    assert out.error["retryable"] is False


async def test_result_schema_violation(env: Env) -> None:
    cid = await ctx_for(env)
    out = await env.kernel.call(cid, "kv.typed", "t1", {"n": "seven"}, principal=APP)
    assert out.status is CallStatus.FAILED
    assert out.error is not None
    assert out.error["code"] == "contract_violation"
    assert out.error["reason"] == "RESULT_SCHEMA_MISMATCH"
    assert "seven" not in json.dumps(out.to_dict())


async def test_oversized_result_is_truncated(env: Env) -> None:
    cid = await ctx_for(env)
    out = await env.kernel.call(cid, "kv.big", "g1", {"size": 1000}, principal=APP)
    assert out.ok
    assert out.data == {"truncated": True, "maxBytes": 100}
    assert out.metrics.output_bytes > 1000
    assert any("RESULT_TRUNCATED" in w for w in out.warnings)


async def test_sensitive_result_fields_are_redacted(env: Env) -> None:
    cid = await ctx_for(env)
    out = await env.kernel.call(
        cid,
        "kv.echo",
        "e1",
        {"payload": {"user": "u", "nested": {"apiKey": "s3cr3t"}}},
        principal=APP,
    )
    assert out.ok
    assert "s3cr3t" not in json.dumps(out.to_dict())
    assert out.data["user"] == "u"


async def test_context_budget(env: Env) -> None:
    from dataclasses import replace

    from charter.errors import ResourceLimit

    env.kernel.settings = replace(env.kernel.settings, token_budget=10)
    with pytest.raises(ResourceLimit) as info:
        await env.kernel.resolve_context(APP, "all")
    assert info.value.reason == "CONTEXT_BUDGET_EXCEEDED"
