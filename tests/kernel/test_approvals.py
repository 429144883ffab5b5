"""Approvals: bound to context, tool (id, version, digest), call id and argument fingerprint;
five-minute lifetime with exact boundaries; single use; operators only; rejection is final."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.envelope import CallStatus
from charter.kernel.principals import Principal, PrincipalKind
from tests.kernel.conftest import ALICE, APP, BOB, Env

pytestmark = pytest.mark.anyio

PUT = {"key": "k", "value": "v"}
OTHER_TENANT_OPERATOR = Principal(
    name="eve",
    tenant="globex",
    kind=PrincipalKind.OPERATOR,
    permissions=frozenset({"approvals:approve", "kv:write"}),
)


async def pending(
    env: Env,
    cid: str,
    call_id: str = "p1",
    args: Any = PUT,
    tool: str = "kv.put",
    approval_id: str | None = None,
) -> Any:
    out = await env.kernel.call(cid, tool, call_id, args, principal=APP, approval_id=approval_id)
    assert out.status is CallStatus.PENDING_APPROVAL, out
    assert out.approval is not None
    return out


async def test_the_whole_flow(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    first = await pending(env, ctx.context_id)
    assert env.runs_of("kv.put") == 0
    run = await env.store.get_row(_run_key(ctx.run_id))
    assert run["status"] == "input_required"
    again = await pending(env, ctx.context_id)  # asking again: the same pending approval
    assert again.approval == first.approval
    decided = await env.kernel.decide(
        first.approval["id"], approve=True, principal=ALICE, reason="fine"
    )
    assert decided.status == "approved"
    assert decided.decided_by == "alice"
    out = await env.kernel.call(ctx.context_id, "kv.put", "p1", PUT, principal=APP)
    assert out.status is CallStatus.SUCCEEDED, out
    assert env.runs_of("kv.put") == 1
    approval = await env.kernel.find_approval(first.approval["id"], "acme")
    assert approval is not None
    assert approval.status == "consumed"
    run = await env.store.get_row(_run_key(ctx.run_id))
    assert run["status"] == "running"
    repeat = await env.kernel.call(ctx.context_id, "kv.put", "p1", PUT, principal=APP)
    assert repeat.metrics.cached is True
    assert env.runs_of("kv.put") == 1


def _run_key(run_id: str) -> Any:
    from charter.ledger.projections import run_key

    return run_key(run_id)


async def approve_first(env: Env, cid: str, call_id: str = "p1", args: Any = PUT) -> str:
    out = await pending(env, cid, call_id, args)
    await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
    return str(out.approval["id"])


async def test_argument_swap_with_the_same_call_id_conflicts(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    await approve_first(env, cid)
    out = await env.kernel.call(cid, "kv.put", "p1", {"key": "k", "value": "EVIL"}, principal=APP)
    assert out.status is CallStatus.CONFLICT
    assert out.error is not None
    assert out.error["reason"] == "IDEMPOTENCY_CONFLICT"
    assert env.runs_of("kv.put") == 0


async def test_argument_swap_presenting_the_approval_gets_a_new_request(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    aid = await approve_first(env, cid)
    out = await pending(env, cid, "p2", {"key": "k", "value": "EVIL"}, approval_id=aid)
    assert out.approval["id"] != aid
    assert any(w.startswith("APPROVAL_MISMATCH") for w in out.warnings)
    assert env.runs_of("kv.put") == 0


async def test_tool_swap(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    aid = await approve_first(env, cid)
    same_id = await env.kernel.call(cid, "kv.delete", "p1", PUT, principal=APP)
    assert same_id.status is CallStatus.CONFLICT
    out = await pending(env, cid, "d1", PUT, tool="kv.delete", approval_id=aid)
    assert out.approval["id"] != aid
    assert env.runs_of("kv.delete") == 0


async def test_call_id_swap(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    aid = await approve_first(env, cid, "p1")
    out = await pending(env, cid, "p2", PUT, approval_id=aid)
    assert out.approval["id"] != aid
    assert env.runs_of("kv.put") == 0


async def test_context_swap(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    other = (await env.kernel.resolve_context(APP, "all")).context_id
    aid = await approve_first(env, cid, "p1")
    out = await pending(env, other, "p1", PUT, approval_id=aid)
    assert out.approval["id"] != aid
    assert env.runs_of("kv.put") == 0


async def test_reuse_after_consumption(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    aid = await approve_first(env, cid, "p1")
    assert (await env.kernel.call(cid, "kv.put", "p1", PUT, principal=APP)).ok
    out = await pending(env, cid, "p3", PUT, approval_id=aid)
    assert out.approval["id"] != aid
    with pytest.raises(InvalidInput) as info:
        await env.kernel.decide(aid, approve=True, principal=ALICE)
    assert info.value.reason == "APPROVAL_NOT_PENDING"
    assert env.runs_of("kv.put") == 1


@pytest.mark.parametrize(("offset", "valid"), [(-1, True), (0, False), (1, False)])
async def test_expiry_boundaries_for_deciding(env: Env, offset: int, valid: bool) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    out = await pending(env, cid)
    env.clock.advance(timedelta(seconds=300 + offset))
    if valid:
        decided = await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
        assert decided.status == "approved"
    else:
        with pytest.raises(PermissionDenied) as info:
            await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
        assert info.value.reason == "APPROVAL_EXPIRED"
        approval = await env.kernel.find_approval(out.approval["id"], "acme")
        assert approval is not None
        assert approval.status == "expired"


@pytest.mark.parametrize(("offset", "dispatches"), [(-1, True), (0, False), (1, False)])
async def test_expiry_boundaries_for_consuming(env: Env, offset: int, dispatches: bool) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    aid = await approve_first(env, cid)
    env.clock.advance(timedelta(seconds=300 + offset))
    out = await env.kernel.call(cid, "kv.put", "p1", PUT, principal=APP)
    if dispatches:
        assert out.status is CallStatus.SUCCEEDED
        assert env.runs_of("kv.put") == 1
    else:
        assert out.status is CallStatus.PENDING_APPROVAL
        assert out.approval is not None
        assert out.approval["id"] != aid
        assert any(w.startswith("APPROVAL_EXPIRED") for w in out.warnings)
        assert env.runs_of("kv.put") == 0


async def test_application_principal_cannot_approve(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    out = await pending(env, cid)
    for approve in (True, False):
        with pytest.raises(PermissionDenied) as info:
            await env.kernel.decide(out.approval["id"], approve=approve, principal=APP)
        assert info.value.reason == "APPROVER_NOT_HUMAN"
    with pytest.raises(PermissionDenied) as info:
        await env.kernel.decide(out.approval["id"], approve=True, principal=BOB)
    assert info.value.reason == "APPROVER_PERMISSION_MISSING"
    with pytest.raises(PermissionDenied) as info:
        await env.kernel.decide(out.approval["id"], approve=True, principal=OTHER_TENANT_OPERATOR)
    assert info.value.reason == "APPROVAL_NOT_FOUND"
    still = await env.kernel.find_approval(out.approval["id"], "acme")
    assert still is not None
    assert still.status == "pending"


async def test_rejection_is_final_for_the_call_id(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await pending(env, ctx.context_id)
    rejected = await env.kernel.decide(
        out.approval["id"], approve=False, principal=ALICE, reason="no"
    )
    assert rejected.status == "rejected"
    with pytest.raises(InvalidInput) as info:
        await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
    assert info.value.reason == "APPROVAL_NOT_PENDING"
    again = await env.kernel.call(ctx.context_id, "kv.put", "p1", PUT, principal=APP)
    assert again.status is CallStatus.DENIED
    assert again.error is not None
    assert again.error["reason"] == "APPROVAL_REJECTED"
    assert env.runs_of("kv.put") == 0
    run = await env.store.get_row(_run_key(ctx.run_id))
    assert run["status"] == "running"


async def test_standalone_approval_token(env: Env) -> None:
    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    out = await pending(env, cid)

    def matches(token: str) -> bool:
        return token == "the-token-0123456789"

    with pytest.raises(PermissionDenied):
        await env.kernel.decide(
            out.approval["id"], approve=True, token="wrong", tenant="acme", token_matches=matches
        )
    decided = await env.kernel.decide(
        out.approval["id"],
        approve=True,
        token="the-token-0123456789",
        tenant="acme",
        token_matches=matches,
    )
    assert decided.decided_by == "approval-token"
    assert (await env.kernel.call(cid, "kv.put", "p1", PUT, principal=APP)).ok


async def test_concurrent_duplicates_share_one_approval_request(env: Env) -> None:
    import asyncio

    cid = (await env.kernel.resolve_context(APP, "all")).context_id
    outs = await asyncio.gather(
        *(env.kernel.call(cid, "kv.put", "w1", PUT, principal=APP) for _ in range(20))
    )
    assert {o.status for o in outs} == {CallStatus.PENDING_APPROVAL}
    assert len({o.approval["id"] for o in outs if o.approval}) == 1
    assert len(await env.kernel.list_approvals(tenant="acme", status="pending")) == 1
    # and the same again once the run is already input_required
    outs = await asyncio.gather(
        *(env.kernel.call(cid, "kv.put", "w2", PUT, principal=APP) for _ in range(20))
    )
    assert len({o.approval["id"] for o in outs if o.approval}) == 1
    assert len(await env.kernel.list_approvals(tenant="acme", status="pending")) == 2


async def test_an_approval_never_outlives_its_context(env: Env) -> None:
    """Asked for 60 s before the context ends, the approval ends with it (not 5 minutes
    later): past the context's end its call can never run, so nobody may approve it then,
    and the inbox does not list it as pending."""
    ctx = await env.kernel.resolve_context(APP, "all")
    lifetime = env.kernel.settings.context_lifetime_s
    env.clock.advance(timedelta(seconds=lifetime - 60))
    out = await pending(env, ctx.context_id)
    assert out.approval["expires_at"] == ctx.expires_at
    env.clock.advance(timedelta(seconds=60))
    with pytest.raises(PermissionDenied) as info:
        await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
    assert info.value.reason == "APPROVAL_EXPIRED"
    assert not await env.kernel.list_approvals(tenant="acme", status="pending")
    late = await env.kernel.call(ctx.context_id, "kv.put", "p1", PUT, principal=APP)
    assert late.error is not None
    assert late.error["reason"] == "CONTEXT_EXPIRED"
    assert env.runs_of("kv.put") == 0
