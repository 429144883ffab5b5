"""Call ids are matched in full, and a receipt is returned only for the call it records.

Before: ``CALL_ID.match`` with a ``$`` anchor accepted ``"a1\\n"`` as another call id (the tool
ran again), and once the context had expired a resubmitted call id got the old receipt
whatever the tool or arguments.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from tests.kernel.conftest import APP, Env

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("bad", ["a1\n", "a1\r\n", "a1 ", "\na1", "a1\x00", "a\u00e91", ""])
async def test_a_call_id_with_a_trailing_newline_or_escape_is_refused(env: Env, bad: str) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    first = await env.kernel.call(ctx.context_id, "kv.get", "a1", {"key": "k"}, principal=APP)
    assert first.status is CallStatus.SUCCEEDED
    out = await env.kernel.call(ctx.context_id, "kv.get", bad, {"key": "k"}, principal=APP)
    assert out.status is CallStatus.REJECTED, out
    assert out.error is not None
    assert out.error["reason"] == "CALL_ID_INVALID"
    assert env.runs_of("kv.get") == 1  # the tool did not run again


@pytest.mark.parametrize("bad", [None, 7, "", b"a1"])
async def test_a_call_id_that_is_no_string_or_empty_says_so(env: Env, bad: Any) -> None:
    """Before, ``call_id=None`` (or a number) was refused as "…, not ''": the message quoted
    an empty string the caller never gave."""
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", bad, {"key": "k"}, principal=APP)
    assert out.status is CallStatus.REJECTED, out
    assert out.error is not None
    assert out.error["reason"] == "CALL_ID_INVALID"
    assert out.error["message"].endswith("(at most 128 characters): give a non-empty string")
    assert env.runs_of("kv.get") == 0


async def test_longest_call_id_is_accepted_and_one_more_character_is_not(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    ok = await env.kernel.call(ctx.context_id, "kv.get", "a" * 128, {"key": "k"}, principal=APP)
    assert ok.status is CallStatus.SUCCEEDED
    too_long = await env.kernel.call(
        ctx.context_id, "kv.get", "a" * 129, {"key": "k"}, principal=APP
    )
    assert too_long.status is CallStatus.REJECTED


async def expired_context_with_a_receipt(env: Env) -> str:
    ctx = await env.kernel.resolve_context(APP, "all")
    first = await env.kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert first.status is CallStatus.SUCCEEDED
    env.clock.advance(timedelta(seconds=env.kernel.settings.context_lifetime_s + 1))
    return ctx.context_id


async def test_expired_context_returns_the_receipt_of_the_same_call(env: Env) -> None:
    cid = await expired_context_with_a_receipt(env)
    again = await env.kernel.call(cid, "kv.get", "c1", '{"key": "a"}', principal=APP)
    assert again.status is CallStatus.SUCCEEDED
    assert again.metrics.cached is True
    assert again.data == {"key": "a", "value": None}
    assert env.runs_of("kv.get") == 1


async def test_expired_context_other_arguments_conflict(env: Env) -> None:
    cid = await expired_context_with_a_receipt(env)
    out = await env.kernel.call(cid, "kv.get", "c1", {"key": "b"}, principal=APP)
    assert out.status is CallStatus.CONFLICT, out
    assert out.error is not None
    assert out.error["reason"] == "IDEMPOTENCY_CONFLICT"
    assert out.data is None


async def test_expired_context_other_tool_conflicts(env: Env) -> None:
    cid = await expired_context_with_a_receipt(env)
    out = await env.kernel.call(cid, "kv.echo", "c1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.CONFLICT, out
    assert out.data is None


async def test_expired_context_arguments_that_do_not_parse_conflict(env: Env) -> None:
    cid = await expired_context_with_a_receipt(env)
    out = await env.kernel.call(cid, "kv.get", "c1", '{"key": "a", "key": "a"}', principal=APP)
    assert out.status is CallStatus.CONFLICT, out


async def test_expired_context_new_call_id_is_denied(env: Env) -> None:
    cid = await expired_context_with_a_receipt(env)
    out = await env.kernel.call(cid, "kv.get", "c2", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert out.error["reason"] == "CONTEXT_EXPIRED"
    assert env.runs_of("kv.get") == 1


async def test_expired_context_conflict_is_recorded(env: Env) -> None:
    cid = await expired_context_with_a_receipt(env)
    await env.kernel.call(cid, "kv.get", "c1", {"key": "b"}, principal=APP)
    ctx = await env.kernel.get_context(cid)
    assert ctx is not None
    outcomes = [
        json.loads(r.data)["payload"]["outcome"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert outcomes[-1] == "conflict"


@pytest.mark.parametrize("bad", ["x" * 50_000, "a\ud800b" + "y" * 200])
async def test_an_invalid_call_id_is_recorded_and_echoed_cut_short(env: Env, bad: str) -> None:
    """A 50,000-character call id used to be kept whole in the ledger's audit record and
    echoed whole in the envelope (and its message); one with a lone surrogate could not be
    recorded at all, and answered ``failed`` / ``ARGS_LONE_SURROGATE`` instead."""
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", bad, {"key": "k"}, principal=APP)
    assert out.status is CallStatus.REJECTED, out
    assert out.error is not None
    assert out.error["reason"] == "CALL_ID_INVALID"
    assert len(out.error["message"]) < 200
    assert len(out.call_id) <= 128 + 5
    assert out.call_id.startswith(bad[:1])
    out.call_id.encode("utf-8")  # an answer can carry it
    records = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert [(r["reason"], r["call_id"]) for r in records] == [("CALL_ID_INVALID", out.call_id)]


@pytest.mark.parametrize("shape", ["dict", "list"])
async def test_arguments_that_hold_themselves_are_rejected_too_deep(env: Env, shape: str) -> None:
    """A library caller's cyclic arguments (a dict or list that holds itself) are the
    intake's ``ARGS_TOO_DEEP``, recorded like any rejection. Before, scrubbing the rejection's
    message of the call's secrets walked the cycle: RecursionError, ``INTERNAL_ERROR``."""
    ctx = await env.kernel.resolve_context(APP, "all")
    cyclic: Any = {} if shape == "dict" else []
    if shape == "dict":
        cyclic["key"] = cyclic
        arguments = cyclic
    else:
        cyclic.append(cyclic)
        arguments = {"key": cyclic}
    out = await env.kernel.call(ctx.context_id, "kv.get", "cyc", arguments, principal=APP)
    assert out.status is CallStatus.REJECTED, out
    assert out.error is not None
    assert out.error["reason"] == "ARGS_TOO_DEEP"
    assert env.runs_of("kv.get") == 0
