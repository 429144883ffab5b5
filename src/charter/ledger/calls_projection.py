"""Projections of the kernel's events: contexts, calls, approvals and per-run call counts.

Like every projection these are pure functions of events, applied inside the append's
transaction. Two of the kernel's guarantees live here, because only the transaction can make
them exact under concurrency (in one process or many sharing the store):

* **Reservation** — a call id is reserved once per context: the first ``approval_requested``
  or ``tool_progress{stage: started}`` creates the call row; a second one for the same
  ``(context, call_id)`` raises :class:`~charter.errors.StoreConflict` (``CALL_EXISTS``), and the
  kernel then reads the winner's row (receipt, coalescing or conflict).
* **Budgets** — a tool's ``call_limit`` per context and the run's tool-call budget are counted
  at reservation; exceeding one raises :class:`~charter.errors.ResourceLimit`, so nothing is
  reserved.

Call rows carry no argument values: a fingerprint, the argument shape (field paths, types,
sizes) with the values of the contract's ``audit`` fields and, once finished, the redacted and
clamped receipt that a repeated call returns (its result only if the contract stores results).
Approval rows keep the redacted preview and arguments a person decides on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.contracts.preview import legacy_record
from charter.errors import InvalidInput, ResourceLimit, StoreConflict
from charter.ledger.rows import (
    EventFacts,
    Getter,
    Handler,
    Row,
    RowKey,
    TableSpec,
    Writes,
    new_row_key,
)

TERMINAL_CALL_STATES = frozenset(
    {"denied", "succeeded", "failed", "unknown", "cancelled", "abandoned"}
)
STAGE_STATE = {
    "completed": "succeeded",
    "failed": "failed",
    "unknown": "unknown",
    "cancelled": "cancelled",
    "abandoned": "abandoned",
}
# Which call states each terminal stage may follow. An operator may resolve an ``unknown``
# call (payload ``resolved_by``) to what really happened; nothing else leaves a terminal state.
_STAGE_FROM: Mapping[str, frozenset[str]] = {
    "completed": frozenset({"dispatching"}),
    "failed": frozenset({"dispatching"}),
    "unknown": frozenset({"dispatching"}),
    "cancelled": frozenset({"dispatching"}),
    "abandoned": frozenset({"dispatching", "unknown"}),
}
_RESOLVABLE = frozenset({"completed", "failed", "abandoned"})
_UNKNOWN = frozenset({"unknown"})

TABLES: Mapping[str, TableSpec] = {
    "contexts": TableSpec(
        name="contexts",
        keys=("run_id", "context_id"),
        columns=("tenant", "principal", "expires_at", "created_at"),
        order_by="created_at",
    ),
    "calls": TableSpec(
        name="calls",
        keys=("run_id", "context_id", "call_id"),
        # parent_span_id: the delegating call's span (migration SQLite 12 / PostgreSQL 11)
        columns=("state", "tool_id", "tenant", "updated_seq", "parent_span_id"),
        order_by="updated_seq",
        fixed=("tool_id", "tenant"),  # a call id stays with its tool and its context's tenant
    ),
    "approvals": TableSpec(
        name="approvals",
        keys=("run_id", "approval_id"),
        columns=("status", "tenant", "context_id", "call_id", "requested_at", "expires_at"),
        order_by="requested_at",
    ),
    "run_calls": TableSpec(
        name="run_calls", keys=("run_id",), columns=("total",), order_by="total"
    ),
}


def context_key(run_id: str, context_id: str) -> RowKey:
    return new_row_key(RowKey, ("contexts", (run_id, context_id)))


def call_key(run_id: str, context_id: str, call_id: str) -> RowKey:
    return new_row_key(RowKey, ("calls", (run_id, context_id, call_id)))


def approval_key(run_id: str, approval_id: str) -> RowKey:
    return new_row_key(RowKey, ("approvals", (run_id, approval_id)))


def run_calls_key(run_id: str) -> RowKey:
    return new_row_key(RowKey, ("run_calls", (run_id,)))


def _bad(message: str, reason: str = "EVENT_PAYLOAD_INVALID") -> InvalidInput:
    return InvalidInput(message, reason=reason)


def _s(payload: Mapping[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise _bad(f"payload field {name!r} must be a non-empty string")
    return value


# ---------------------------------------------------------------------------------------
# contexts


def _reads_context(run_id: str, p: Mapping[str, Any]) -> tuple[RowKey, ...]:
    cid = p.get("context_id")
    return (context_key(run_id, cid),) if isinstance(cid, str) else ()


def _context_resolved(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    cid = _s(p, "context_id")
    key = context_key(event.run_id, cid)
    if get(key) is not None:
        raise StoreConflict("the context already exists", reason="CONTEXT_EXISTS")
    row: Row = {
        **dict(p),
        "run_id": event.run_id,
        "context_id": cid,
        "tenant": _s(p, "tenant"),
        "principal": _s(p, "principal"),
        "expires_at": _s(p, "expires_at"),
        "created_at": event.at,
        "calls_by_tool": {},
    }
    return {key: row}


# ---------------------------------------------------------------------------------------
# reservation and budgets


def _reads_call(run_id: str, p: Mapping[str, Any]) -> tuple[RowKey, ...]:
    cid, call = p.get("context_id"), p.get("call_id")
    keys: list[RowKey] = [run_calls_key(run_id)]
    if isinstance(cid, str):
        keys.append(context_key(run_id, cid))
        if isinstance(call, str):
            keys.append(call_key(run_id, cid, call))
    for field in ("approval_id", "replaces"):
        aid = p.get(field)
        if isinstance(aid, str):
            keys.append(approval_key(run_id, aid))
    return tuple(keys)


def _reads_progress(run_id: str, p: Mapping[str, Any]) -> tuple[RowKey, ...]:
    """A ``started`` stage may reserve the call (:func:`_reads_call`); every other stage reads
    only its call row (see :func:`_tool_progress`), so the context and the run's call count
    are not fetched for a call's outcome."""
    if p.get("stage") == "started":
        return _reads_call(run_id, p)
    cid, call = p.get("context_id"), p.get("call_id")
    if isinstance(cid, str) and isinstance(call, str):
        return (call_key(run_id, cid, call),)
    return ()


def _reserve(
    event: EventFacts,
    get: Getter,
    *,
    state: str,
    absent: RowKey | None = None,
    dispatch: bool = False,
) -> Writes:
    """Create the call row and count it against the budgets; conflict if it exists.

    ``absent``: the call's key, when the caller has just found no row there. ``dispatch``:
    the row is made already dispatched (a ``started`` stage): it is the row reserved and then
    updated with :func:`_dispatched`, key for key and in the same key order, built at once.

    Every governed call and every verified replay runs this once per call: the checks of
    :func:`_s` are inlined for the common case (a plain non-empty ``str``; anything else goes
    through :func:`_s`, which accepts or refuses it as before), row keys are built without a
    helper's frame, and the context's per-tool counts are copied only for a tool with a limit
    (the only case that writes them)."""
    p = event.payload
    run_id = event.run_id
    cid = p.get("context_id")
    if type(cid) is not str or not cid:
        cid = _s(p, "context_id")
    call_id = p.get("call_id")
    if type(call_id) is not str or not call_id:
        call_id = _s(p, "call_id")
    tool_id = p.get("tool_id")
    if type(tool_id) is not str or not tool_id:
        tool_id = _s(p, "tool_id")
    key = absent or new_row_key(RowKey, ("calls", (run_id, cid, call_id)))
    if absent is None and get(key) is not None:
        raise StoreConflict("the call id is already reserved", reason="CALL_EXISTS")
    ctx_key = new_row_key(RowKey, ("contexts", (run_id, cid)))
    ctx = get(ctx_key)
    if ctx is None:
        raise _bad("the call names a context this run does not have", "CONTEXT_NOT_FOUND")
    counted = ctx.get("calls_by_tool") or {}
    if type(counted) is not dict:
        counted = dict(counted)
    limit = None
    for tool in ctx.get("tools", []):  # the first entry for the tool holds its limit
        if tool.get("id") == tool_id:
            limit = tool.get("call_limit")
            break
    count = int(counted.get(tool_id, 0)) + 1
    if isinstance(limit, int) and count > limit:
        raise ResourceLimit(
            f"tool {tool_id} may be called at most {limit} times in one context",
            reason="CALL_LIMIT_EXCEEDED",
            details={"limit": limit},
        )
    totals_key = new_row_key(RowKey, ("run_calls", (run_id,)))
    totals = get(totals_key) or {"run_id": run_id, "total": 0}
    budget = p.get("run_call_budget")
    total = int(totals["total"]) + 1
    if isinstance(budget, int) and total > budget:
        raise ResourceLimit(
            f"the run may make at most {budget} tool calls",
            reason="RUN_CALL_BUDGET_EXCEEDED",
            details={"limit": budget},
        )
    at, seq = event.at, event.seq
    fingerprint = p.get("fingerprint")
    if type(fingerprint) is not str or not fingerprint:
        fingerprint = _s(p, "fingerprint")
    tenant = p.get("tenant")
    if type(tenant) is not str or not tenant:
        tenant = _s(p, "tenant")
    row: Row = {
        "run_id": run_id,
        "context_id": cid,
        "call_id": call_id,
        "tool_id": tool_id,
        "tool_version": p.get("tool_version"),
        "contract_digest": p.get("contract_digest"),
        "fingerprint": fingerprint,
        "tenant": tenant,
        "actor": p.get("actor"),
        "state": state,
        "approval_id": p.get("approval_id"),
        "task_id": p.get("task_id"),
        # the argument shape (+ audit fields); an event written before shapes has the redacted
        # summary instead, of which the row keeps the shape (store migration 9/8 rewrote the
        # rows written before; docs/privacy.md, "older databases")
        "summary": p["arguments"] if "arguments" in p else legacy_record(p.get("summary")),
        "attempts": 1 if dispatch else 0,
        "receipt": None,
        "owner": p.get("owner") if dispatch else None,
        "reserved_seq": seq,
        "updated_seq": seq,
        "created_at": at,
        "updated_at": at,
    }
    parent_span_id = p.get("parent_span_id")
    if isinstance(parent_span_id, str):  # a delegated call (docs/kernel.md)
        row["parent_span_id"] = parent_span_id
    if dispatch:  # the keys _dispatched adds, in its order (parent_span_id is set above)
        row["idempotency_key"] = p.get("idempotency_key")
        span_id = p.get("span_id")
        if isinstance(span_id, str):
            row["span_id"] = span_id
        if p.get("delegates_execution") is True:
            row["delegates_execution"] = True
        if "secret_marks" in p:  # for an operator's note resolving it (kernel/secret_marks.py)
            row["secret_marks"] = p["secret_marks"]
    writes: Writes = {key: row, totals_key: {"run_id": run_id, "total": total}}
    if isinstance(limit, int):
        # Only tools with a call limit are counted per context: the context row is rewritten
        # for them alone, not for every call.
        used = dict(counted)
        used[tool_id] = count
        writes[ctx_key] = {**ctx, "calls_by_tool": used}
    return writes


def _status(get: Getter, run_id: str, approval_id: object) -> str | None:
    if not isinstance(approval_id, str):
        return None
    row = get(approval_key(run_id, approval_id))
    return None if row is None else str(row["status"])


def _approval_requested(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    aid = _s(p, "approval_id")
    akey = approval_key(event.run_id, aid)
    if get(akey) is not None:
        raise StoreConflict("the approval already exists", reason="APPROVAL_EXISTS")
    cid, call_id = _s(p, "context_id"), _s(p, "call_id")
    ckey = call_key(event.run_id, cid, call_id)
    existing = get(ckey)
    writes: Writes
    if existing is None:
        writes = _reserve(event, get, state="pending_approval")
    elif (
        existing["state"] == "pending_approval"
        and existing["fingerprint"] == p.get("fingerprint")
        and p.get("replaces") == existing.get("approval_id")
        and _status(get, event.run_id, existing.get("approval_id")) == "expired"
    ):
        # A fresh request for the same call, allowed only once its approval has expired;
        # a concurrent duplicate asking at the same time conflicts and reads this one.
        writes = {
            ckey: {
                **existing,
                "approval_id": aid,
                # a request replacing a stale approval binds the tool's current contract
                "tool_version": p.get("tool_version", existing.get("tool_version")),
                "contract_digest": p.get("contract_digest", existing.get("contract_digest")),
                "updated_seq": event.seq,
                "updated_at": event.at,
            }
        }
    else:
        raise StoreConflict("the call id is already reserved", reason="CALL_EXISTS")
    approval: Row = {
        "run_id": event.run_id,
        "approval_id": aid,
        "status": "pending",
        "context_id": cid,
        "call_id": call_id,
        "tool_id": _s(p, "tool_id"),
        "tool_version": p.get("tool_version"),
        "contract_digest": _s(p, "contract_digest"),
        "fingerprint": _s(p, "fingerprint"),
        "tenant": _s(p, "tenant"),
        "requested_by": p.get("actor"),
        "summary": p.get("summary"),
        "full_arguments": p.get("full_arguments"),
        "effect": p.get("effect"),
        "danger": p.get("danger"),
        "requested_at": event.at,
        "expires_at": _s(p, "expires_at"),
        "decided_by": None,
        "decided_at": None,
        "reason": None,
    }
    marks = p.get("secret_marks")
    if marks:  # kept while the request is pending (kernel/secret_marks.py)
        approval["secret_marks"] = marks
    writes[akey] = approval
    return writes


def _reads_approval(run_id: str, p: Mapping[str, Any]) -> tuple[RowKey, ...]:
    aid = p.get("approval_id")
    if not isinstance(aid, str):
        return ()
    keys = [approval_key(run_id, aid)]
    cid, call = p.get("context_id"), p.get("call_id")
    if isinstance(cid, str) and isinstance(call, str):
        keys.append(call_key(run_id, cid, call))
    return tuple(keys)


_APPROVAL_FROM: Mapping[str, tuple[frozenset[str], str]] = {
    # event type: (statuses it may follow, new status). An approved but unused approval
    # still expires at the end of its lifetime.
    "approval_approved": (frozenset({"pending"}), "approved"),
    "approval_rejected": (frozenset({"pending"}), "rejected"),
    "approval_expired": (frozenset({"pending", "approved"}), "expired"),
    "approval_consumed": (frozenset({"approved"}), "consumed"),
}


def _approval_decided(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    aid = _s(p, "approval_id")
    akey = approval_key(event.run_id, aid)
    approval = get(akey)
    if approval is None:
        raise _bad("no such approval", "APPROVAL_NOT_FOUND")
    allowed, new = _APPROVAL_FROM[event.type]
    if approval["status"] not in allowed:
        raise InvalidInput(
            f"the approval is {approval['status']}",
            reason="APPROVAL_NOT_APPROVED"
            if event.type == "approval_consumed"
            else "APPROVAL_NOT_PENDING",
        )
    updated = {**approval, "status": new}
    updated.pop("secret_marks", None)  # needed only to scrub the decision's note
    if event.type != "approval_consumed":
        updated.update(decided_by=p.get("actor"), decided_at=event.at, reason=p.get("reason"))
    writes: Writes = {akey: updated}
    if event.type == "approval_rejected":
        ckey = call_key(event.run_id, approval["context_id"], approval["call_id"])
        call = get(ckey)
        if call is not None and call["state"] == "pending_approval":
            receipt: dict[str, Any] = {
                "status": "denied",
                "data": None,
                "error": {
                    "code": "permission_denied",
                    "reason": "APPROVAL_REJECTED",
                    "message": "an operator rejected this call",
                    "retryable": False,
                },
                "warnings": [],
                "artifact_ids": [],
                "output_bytes": 0,
                "attempts": 0,
            }
            writes[ckey] = {
                **call,
                "state": "denied",
                "receipt": receipt,
                "updated_seq": event.seq,
                "updated_at": event.at,
            }
    return writes


# ---------------------------------------------------------------------------------------
# dispatch and outcome


def _tool_progress(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    stage = p.get("stage")
    cid, call_id = p.get("context_id"), p.get("call_id")
    if not isinstance(cid, str) or not isinstance(call_id, str):
        return {}  # a progress note that is not about a reserved call
    ckey = new_row_key(RowKey, ("calls", (event.run_id, cid, call_id)))  # call_key, inlined
    if stage == "started":
        call = get(ckey)
        if call is None:
            return _reserve(event, get, state="dispatching", absent=ckey, dispatch=True)
        if call["state"] == "pending_approval":
            aid = call.get("approval_id")
            approval = get(approval_key(event.run_id, aid)) if isinstance(aid, str) else None
            if approval is None or approval["status"] != "consumed":
                raise InvalidInput(
                    "a call waiting for approval may start only with its approval consumed",
                    reason="APPROVAL_REQUIRED",
                )
            return {ckey: {**call, **_dispatched(event)}}
        raise StoreConflict("the call id is already reserved", reason="CALL_EXISTS")
    call = get(ckey)
    if call is None:
        return {}
    if stage == "retrying":
        return {ckey: {**call, "attempts": int(call["attempts"]) + 1, "updated_seq": event.seq}}
    if stage == "late_result":
        # An answer that arrived after the call was made unknown (by restart reconciliation):
        # kept on the row as evidence for an operator; the state does not change.
        late = p.get("receipt")
        return {
            ckey: {
                **call,
                "late_result": {
                    "at": event.at,
                    "seq": event.seq,
                    "receipt": late if isinstance(late, Mapping) else None,
                },
                "updated_seq": event.seq,
                "updated_at": event.at,
            }
        }
    if stage not in STAGE_STATE:
        return {}  # result_accepted, cache_hit: observational
    resolving = p.get("resolved_by") is not None
    allowed = _STAGE_FROM[stage]
    if resolving and stage in _RESOLVABLE:
        allowed = allowed | _UNKNOWN
    if call["state"] not in allowed:
        raise InvalidInput(
            f"a {call['state']} call cannot become {STAGE_STATE[stage]}",
            reason="CALL_TRANSITION_INVALID",
        )
    receipt = p.get("receipt")
    return {
        ckey: {
            **call,
            "state": STAGE_STATE[stage],
            # type() first: isinstance against the Mapping ABC is a slow check on every call
            "receipt": receipt
            if type(receipt) is dict or isinstance(receipt, Mapping)
            else call.get("receipt"),
            "resolution": {"by": p.get("resolved_by"), "reason": p.get("reason")}
            if resolving
            else call.get("resolution"),
            "updated_seq": event.seq,
            "updated_at": event.at,
        }
    }


def _dispatched(event: EventFacts) -> Row:
    """What a ``started`` stage sets on its call row."""
    p = event.payload
    out: Row = {
        "state": "dispatching",
        "owner": p.get("owner"),
        "idempotency_key": p.get("idempotency_key"),
        "attempts": 1,
        "updated_seq": event.seq,
        "updated_at": event.at,
    }
    # spans (docs/kernel.md, "Delegation"): set only where the event has them, so rows of
    # calls recorded before delegation rebuild exactly as they were stored
    for field in ("span_id", "parent_span_id"):
        if isinstance(p.get(field), str):
            out[field] = p[field]
    if p.get("delegates_execution") is True:
        out["delegates_execution"] = True
    if "secret_marks" in p:
        out["secret_marks"] = p["secret_marks"]
    return out


# ---------------------------------------------------------------------------------------
# retention: a run's metadata expired (docs/privacy.md)


def _reads_expired(run_id: str, p: Mapping[str, Any]) -> tuple[RowKey, ...]:
    keys: list[RowKey] = []
    for cid in p.get("contexts", ()):
        if isinstance(cid, str):
            keys.append(context_key(run_id, cid))
    for pair in p.get("calls", ()):
        if isinstance(pair, list | tuple) and len(pair) == 2:
            keys.append(call_key(run_id, str(pair[0]), str(pair[1])))
    for aid in p.get("approvals", ()):
        if isinstance(aid, str):
            keys.append(approval_key(run_id, aid))
    return tuple(keys)


def _metadata_expired(event: EventFacts, get: Getter) -> Writes:
    """Erase the keyed fingerprints (argument and result fingerprints, idempotency keys) of
    the rows the event names, and mark them: deduplication and replay for the run end, and
    its contexts fail closed (``RUN_METADATA_EXPIRED``)."""
    writes: dict[RowKey, Row] = {}
    for key in _reads_expired(event.run_id, event.payload):
        row = get(key)
        if row is None:
            continue
        new = {**row, "metadata_expired_at": event.at}
        if key.table == "calls":
            new["fingerprint"] = ""
            new["idempotency_key"] = None
            new.pop("secret_marks", None)
            receipt = row.get("receipt")
            if isinstance(receipt, Mapping) and "result_fingerprint" in receipt:
                new["receipt"] = {k: v for k, v in receipt.items() if k != "result_fingerprint"}
        elif key.table == "approvals":
            new["fingerprint"] = ""
            new.pop("secret_marks", None)
        writes[key] = new
    return writes


HANDLERS: Mapping[str, Handler] = {
    "run_metadata_expired": Handler(reads=_reads_expired, apply=_metadata_expired),
    "context_resolved": Handler(reads=_reads_context, apply=_context_resolved),
    "approval_requested": Handler(reads=_reads_call, apply=_approval_requested),
    "approval_approved": Handler(reads=_reads_approval, apply=_approval_decided),
    "approval_rejected": Handler(reads=_reads_approval, apply=_approval_decided),
    "approval_expired": Handler(reads=_reads_approval, apply=_approval_decided),
    "approval_consumed": Handler(reads=_reads_approval, apply=_approval_decided),
    "tool_progress": Handler(reads=_reads_progress, apply=_tool_progress),
}
