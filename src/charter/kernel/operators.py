"""Operators' tools: restart reconciliation, resolving unknown calls, reading calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.contracts.text import MAX_REASON, bounded
from charter.errors import (
    InvalidInput,
    PermissionDenied,
    StoreConflict,
)
from charter.kernel.answers import audit_decision
from charter.kernel.audit import AuditOutcome
from charter.kernel.core import KernelState
from charter.kernel.delegation import delegates, orphaned_receipt
from charter.kernel.leases import lapsed
from charter.kernel.principals import Principal
from charter.kernel.secret_marks import scrub_note
from charter.kernel.store import KernelStore
from charter.ledger.events import NewEvent
from charter.ledger.trust import RunLedgerInvalid, refuse_vanished
from charter.ledger.views import CallRow, ContextRow


class Operators:
    """What operators do beside approvals: reconcile after a restart, resolve, read calls."""

    def __init__(self, state: KernelState) -> None:
        self.state = state

    async def reconcile(self) -> list[CallRow]:
        """Calls left ``dispatching`` by a process that is gone become ``unknown`` (an
        orphaned delegating call ``abandoned``: it had no effect of its own).

        Gone: its owner lease lapsed or was released (on any host), or — on this host — its
        pid is dead or reused. A live owner's calls are left alone, and so are this process's
        own while one of its calls runs them; this process's own that no call runs any more
        (the store failed as the outcome was recorded) are stranded and reconciled too.
        Any number of processes may reconcile at once: the ledger lets one ``unknown`` per
        call through, the others skip it.
        """
        state = self.state
        changed = []
        rows = await state.store.find_views(CallRow, state="dispatching", limit=10_000)
        owners = [r.owner or {} for r in rows]
        leases = await state.lease.read(
            {str(o["lease"]) for o in owners if o.get("lease") and o != state.owner}
        )
        now = state.now()
        for row, owner in zip(rows, owners, strict=True):
            if owner == state.owner:
                if state.flying.get((row.context_id, row.call_id)):
                    continue  # ours and running: this process records its outcome
                # ours, but no call of this process runs it any more: stranded (below)
            elif owner.get("lease") and state.lease.supported:
                gone = lapsed(leases.get(str(owner["lease"])), now)
                dead_here = owner.get("host") == state.owner["host"] and not _alive(owner)
                if not (gone or dead_here):
                    continue
            elif owner.get("host") != state.owner["host"] or _alive(owner):
                continue  # no lease to go by: only a dead pid on this host is known gone
            if await settle_stranded(state, row):
                changed.append(row)
        return changed

    async def resolve_call(
        self,
        context_id: str,
        call_id: str,
        *,
        outcome: str,
        reason: str,
        operator: Principal,
    ) -> CallRow:
        """Record an operator's finding for an ``unknown`` (or stuck) call."""
        if not operator.is_operator:
            raise PermissionDenied(
                "only an operator may resolve a call", reason="RESOLVER_NOT_HUMAN"
            )
        bounded(reason, field="reason", limit=MAX_REASON, reason="REASON_TOO_LONG")
        stages = {"succeeded": "completed", "failed": "failed", "abandoned": "abandoned"}
        if outcome not in stages:
            raise InvalidInput(
                "outcome must be succeeded, failed or abandoned", reason="OUTCOME_INVALID"
            )
        ctx = await self.state.context(context_id, operator.tenant)
        if ctx is None or ctx.tenant != operator.tenant:
            raise PermissionDenied("no such context", reason="CONTEXT_NOT_FOUND")
        row = await self.state.call_row(ctx, call_id)
        if row is None:
            raise PermissionDenied("no such call", reason="CALL_NOT_FOUND")
        marks = row.row.get("secret_marks")
        note = scrub_note(  # the call's own secret arguments, too (docs/privacy.md)
            reason,
            marks if isinstance(marks, list) else None,
            self.state.fingerprinter,
            self.state.redactor,
        )
        receipt = dict(row.receipt or {})
        receipt.update(status=outcome if outcome != "succeeded" else "succeeded")
        await self.state.store.append(
            ctx.run_id,
            [
                NewEvent(
                    type="tool_progress",
                    payload={
                        "stage": stages[outcome],
                        "context_id": context_id,
                        "call_id": call_id,
                        "resolved_by": operator.name,
                        "reason": note,
                        "receipt": receipt,
                    },
                )
            ],
        )
        updated = await self.state.call_row(ctx, call_id)
        assert updated is not None
        await audit_decision(
            self.state,
            AuditOutcome.RESOLVED,
            row,
            actor=operator.name,
            details={"outcome": outcome, "note": note},
        )
        return updated

    async def get_call(self, context_id: str | None, call_id: str, tenant: str) -> CallRow | None:
        if context_id is None:
            context_id = await context_of_call(self.state.store, call_id, tenant)
            if context_id is None:
                return None
        ctx = await self.state.context(context_id, tenant)
        if ctx is None or ctx.tenant != tenant:
            return None
        return await self.state.store.read_view(CallRow, ctx.run_id, context_id, call_id)

    async def context_row(self, run_id: str, context_id: str) -> ContextRow | None:
        return await self.state.store.read_view(ContextRow, run_id, context_id)


async def context_of_call(store: KernelStore, call_id: str, tenant: str | None) -> str | None:
    """The one context (of ``tenant``; None: any) with a call ``call_id``, None when there is
    none. A call id is unique within a context only: several is ``CALL_ID_AMBIGUOUS``,
    naming them (``GET /v1/calls/{call_id}``, ``charter calls show ID``)."""
    where = {"call_id": call_id} if tenant is None else {"call_id": call_id, "tenant": tenant}
    rows = await store.find_views(CallRow, limit=10, **where)
    # a call row with this id deleted outside Charter refuses its run (one indexed read):
    # else the id would answer from another context, or not be found
    await refuse_vanished(store, "calls", call_id, tenant)
    contexts = sorted({row.context_id for row in rows})
    if len(contexts) > 1:
        raise InvalidInput(
            f"contexts {', '.join(contexts)} each have a call with this id: name one "
            "(charter calls show ID --context CTX; GET /v1/calls/{context_id}/{call_id})",
            reason="CALL_ID_AMBIGUOUS",
        )
    return contexts[0] if contexts else None


async def settle_stranded(state: KernelState, row: CallRow) -> bool:
    """Record a call nobody will finish ``unknown`` (a delegating call ``abandoned``: it had
    no effect of its own; its children are reconciled alone). False when it was resolved
    meanwhile (the ledger lets one ending per call through) or its run is refused."""
    if delegates(row):
        stage, receipt = "abandoned", orphaned_receipt(row.attempts)
    else:
        stage, receipt = "unknown", interrupted_receipt(row.attempts)
    progress = {
        "stage": stage,
        "context_id": row.context_id,
        "call_id": row.call_id,
        "receipt": receipt,
        "reason": receipt["error"]["reason"],
    }
    try:
        await state.store.append(row.run_id, [NewEvent(type="tool_progress", payload=progress)])
    except (InvalidInput, StoreConflict, RunLedgerInvalid):
        return False  # resolved meanwhile, or a damaged run (refused and reported)
    return True


def _alive(owner: Mapping[str, Any]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            start = fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return False
    return start == owner.get("start")


def interrupted_receipt(attempts: int) -> dict[str, Any]:
    """The receipt of a call whose process stopped before its outcome was recorded."""
    return {
        "status": "unknown",
        "data": None,
        "error": {
            "code": "internal",
            "reason": "DISPATCH_INTERRUPTED",
            "message": "the process running this call stopped before its outcome "
            "was recorded; the effect may or may not have happened",
            "retryable": False,
        },
        "warnings": [],
        "artifact_ids": [],
        "output_bytes": 0,
        "attempts": attempts,
    }
