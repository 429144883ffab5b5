"""The ``proposals`` projection: a proposal's record and lifecycle, rebuilt from its events.

Lifecycle (DESIGN §2)::

    draft → validated | blocked → approved | rejected → applied      (or expired)

``proposal_created`` writes the draft; ``proposal_validated`` / ``proposal_blocked`` carry the
diagnostics; ``proposal_approved`` / ``proposal_rejected`` / ``proposal_expired`` the actor;
``proposal_apply_started`` binds the one kernel call that applies it (so a retried apply reuses
the same context and call id and can never run twice); ``proposal_applied`` the result. Any
other transition raises ``PROPOSAL_ILLEGAL_TRANSITION``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.errors import InvalidInput, StoreConflict
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

TABLES: Mapping[str, TableSpec] = {
    "proposals": TableSpec(
        name="proposals",
        keys=("run_id", "proposal_id"),
        columns=("tenant", "status", "kind", "created_at"),
        order_by="created_at",
    ),
}

TRANSITIONS: Mapping[str, Mapping[str, frozenset[str]]] = {
    "proposal_validated": {"validated": frozenset({"draft"})},
    "proposal_blocked": {"blocked": frozenset({"draft"})},
    "proposal_approved": {"approved": frozenset({"validated"})},
    "proposal_rejected": {"rejected": frozenset({"validated", "blocked"})},
    "proposal_applied": {"applied": frozenset({"approved"})},
    "proposal_expired": {"expired": frozenset({"draft", "validated", "blocked", "approved"})},
}


def proposal_key(run_id: str, proposal_id: str) -> RowKey:
    return new_row_key(RowKey, ("proposals", (run_id, proposal_id)))


def _pid(payload: Mapping[str, Any]) -> str:
    value = payload.get("proposal_id")
    if not isinstance(value, str) or not value:
        raise InvalidInput(
            "payload field 'proposal_id' must be a string", reason="EVENT_PAYLOAD_INVALID"
        )
    return value


def _reads(run_id: str, p: Mapping[str, Any]) -> tuple[RowKey, ...]:
    pid = p.get("proposal_id")
    return (proposal_key(run_id, pid),) if isinstance(pid, str) else ()


def _created(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    pid = _pid(p)
    key = proposal_key(event.run_id, pid)
    if get(key) is not None:
        raise StoreConflict("the proposal already exists", reason="PROPOSAL_EXISTS")
    tenant = p.get("tenant")
    kind = p.get("kind")
    if not isinstance(tenant, str) or not isinstance(kind, str):
        raise InvalidInput("a proposal needs a tenant and a kind", reason="EVENT_PAYLOAD_INVALID")
    row: Row = {
        **dict(p),
        "run_id": event.run_id,
        "proposal_id": pid,
        "status": "draft",
        "created_at": event.at,
        "updated_at": event.at,
        "history": [{"status": "draft", "actor": p.get("requested_by"), "at": event.at}],
        "apply": None,
        "applied": None,
    }
    return {key: row}


def _changed(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    key = proposal_key(event.run_id, _pid(p))
    row = get(key)
    if row is None:
        raise InvalidInput("no such proposal", reason="PROPOSAL_NOT_FOUND")
    ((target, sources),) = TRANSITIONS[event.type].items()
    if row["status"] not in sources:
        raise InvalidInput(
            f"a {row['status']} proposal cannot become {target}",
            reason="PROPOSAL_ILLEGAL_TRANSITION",
        )
    entry = {"status": target, "actor": p.get("actor"), "at": event.at}
    if p.get("reason"):
        entry["reason"] = p["reason"]
    updated: Row = {
        **row,
        "status": target,
        "updated_at": event.at,
        "history": [*row["history"], entry],
    }
    if "diagnostics" in p:
        updated["diagnostics"] = p["diagnostics"]
    if event.type == "proposal_applied":
        updated["applied"] = {"actor": p.get("actor"), "result": p.get("result"), "at": event.at}
    return {key: updated}


def _apply_started(event: EventFacts, get: Getter) -> Writes:
    p = event.payload
    key = proposal_key(event.run_id, _pid(p))
    row = get(key)
    if row is None:
        raise InvalidInput("no such proposal", reason="PROPOSAL_NOT_FOUND")
    if row["status"] != "approved" or row.get("apply") is not None:
        raise InvalidInput(
            "only an approved proposal not yet being applied can start applying",
            reason="PROPOSAL_ILLEGAL_TRANSITION",
        )
    apply = {
        "context_id": p.get("context_id"),
        "call_id": p.get("call_id"),
        "actor": p.get("actor"),
        "at": event.at,
    }
    return {key: {**row, "apply": apply, "updated_at": event.at}}


HANDLERS: Mapping[str, Handler] = {
    "proposal_created": Handler(reads=_reads, apply=_created),
    "proposal_apply_started": Handler(reads=_reads, apply=_apply_started),
    **{t: Handler(reads=_reads, apply=_changed) for t in TRANSITIONS},
}
