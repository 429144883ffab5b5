"""The approval gate: requests bound to the exact call, decisions by operators only."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from charter.contracts.text import MAX_REASON, bounded
from charter.errors import (
    InvalidInput,
    PermissionDenied,
    ResourceLimit,
    StoreConflict,
)
from charter.kernel.answers import Answers, Subject, audit_decision
from charter.kernel.audit import AuditOutcome
from charter.kernel.core import Attempt, KernelState, _parse_at
from charter.kernel.envelope import CallStatus, Envelope, Metrics
from charter.kernel.limits import PendingCaps, pending_approvals_refusal
from charter.kernel.principals import Principal
from charter.kernel.secret_marks import scrub_note, secret_marks
from charter.ledger.events import NewEvent, format_at
from charter.ledger.trust import LEDGER_DAMAGE, refuse_vanished, skipped_damaged
from charter.ledger.views import ApprovalRow, CallRow, RunRow

logger = logging.getLogger("charter.kernel.approvals")
_RETRIES = 20  # appends decided at the run's head, retried when another append got in first
_LIVE = frozenset({"pending", "approved"})
"""Approval states that end with the approval's lifetime."""


class ApprovalGate:
    """Phase 6 of the call path, and the operators' decisions on what it requested."""

    def __init__(self, state: KernelState, answers: Answers) -> None:
        self.state = state
        self.answers = answers

    async def check(self, at: Attempt, row: CallRow | None) -> Envelope | ApprovalRow | None:
        """An approval to consume, a ``pending_approval`` answer, or None after a lost race.

        ``row`` is the call's reservation, if any: the approval it names is the one checked.
        """
        state, ctx, contract = self.state, at.ctx, at.bound()
        now = state.now()
        approval: ApprovalRow | None = None
        if row is not None and row.approval_id:
            approval = await state.store.read_view(ApprovalRow, ctx.run_id, row.approval_id)
        if at.presented is not None and (approval is None or at.presented != approval.approval_id):
            at.warnings.append("APPROVAL_MISMATCH: the presented approval is bound to another call")
            await self.answers.audit(at, "approval_mismatch", 0.0, reason="APPROVAL_MISMATCH")
        entries: list[NewEvent] = []
        if approval is not None:
            status = approval.status
            expired = now >= _parse_at(approval.expires_at)
            bound = (
                approval.context_id == ctx.context_id
                and approval.call_id == at.call_id
                and approval.tool_id == contract.id
                and approval.tool_version == contract.version
                and approval.contract_digest == contract.digest
                and approval.fingerprint == at.fingerprint
            )
            if status == "approved" and not expired and bound:
                return approval
            if status in ("pending", "approved") and not expired and not bound:
                # Bound to another version or digest of this tool (the Build changed since):
                # what a person approved is not what would run. Retire it, ask again.
                at.warnings.append(
                    "APPROVAL_STALE: the tool's contract changed since the approval; a new "
                    "approval was requested"
                )
                entries.append(
                    NewEvent(
                        type="approval_expired",
                        payload={
                            "approval_id": approval.approval_id,
                            "context_id": ctx.context_id,
                            "call_id": at.call_id,
                            "actor": "kernel",
                            "reason": "APPROVAL_STALE",
                        },
                    )
                )
            elif status == "pending" and not expired:
                await self.audit_pending(at, approval.approval_id, approval.expires_at, new=False)
                return self.pending(at, approval.approval_id, approval.expires_at)
            elif status == "expired":
                at.warnings.append("APPROVAL_EXPIRED: a new approval was requested")
            elif status in ("pending", "approved") and expired:
                at.warnings.append("APPROVAL_EXPIRED: a new approval was requested")
                entries.append(
                    NewEvent(
                        type="approval_expired",
                        payload={
                            "approval_id": approval.approval_id,
                            "context_id": ctx.context_id,
                            "call_id": at.call_id,
                            "actor": "kernel",
                        },
                    )
                )
            elif not bound:
                at.warnings.append("APPROVAL_MISMATCH: the approval does not match this call")
        caps = PendingCaps(
            tenant=state.settings.pending_approvals_tenant,
            principal=state.settings.pending_approvals_principal,
        )
        too_many = await pending_approvals_refusal(state.store, caps, at.principal, format_at(now))
        if too_many is not None:
            return await self.answers.refuse(at, too_many, CallStatus.DENIED)
        approval_id = state.new_id("apr")
        # An approval never outlives its context: past the context's end its call can never
        # run, so a person must not be asked to approve it (nor see it wait in the inbox).
        lifetime = now + timedelta(seconds=state.settings.approval_lifetime_s)
        expires_at = format_at(min(lifetime, state.expiry(ctx)))
        entries.append(
            NewEvent(
                type="approval_requested",
                payload={
                    "approval_id": approval_id,
                    "context_id": ctx.context_id,
                    "call_id": at.call_id,
                    "tool_id": contract.id,
                    "tool_version": contract.version,
                    "contract_digest": contract.digest,
                    "fingerprint": at.fingerprint,
                    "tenant": ctx.tenant,
                    "actor": at.principal.name,
                    "summary": at.summary.preview,  # what the approver sees
                    "arguments": at.summary.record,  # what the call row keeps
                    "full_arguments": at.summary.full,  # redacted; `approvals show --full`
                    "effect": contract.effect.value,
                    "danger": contract.danger.value if contract.danger else None,
                    "expires_at": expires_at,
                    "run_call_budget": state.settings.run_call_budget,
                    "replaces": approval.approval_id if approval is not None else None,
                    **({"parent_span_id": at.parent_span_id} if at.parent_span_id else {}),
                    **self._marks(at),
                },
            )
        )
        # The run's status is decided from what the store holds at ``head``; the append
        # succeeds only if nothing was appended since (else the caller decides again).
        head = await state.store.head(ctx.run_id)
        run = await state.store.read_view(RunRow, ctx.run_id)
        if run is not None and run.status == "running":
            entries.append(
                NewEvent(
                    type="run_status_changed", payload={"status": "input_required", "by": "kernel"}
                )
            )
        try:
            await state.store.append(
                ctx.run_id, entries, expected_seq=head.seq + 1 if head is not None else None
            )
        except StoreConflict:
            return None  # a concurrent duplicate reserved the call first: read its row
        except InvalidInput as exc:
            if exc.reason != "ILLEGAL_TRANSITION":
                raise
            return None  # a concurrent request already moved the run to input_required
        except ResourceLimit as exc:
            return await self.answers.refuse(at, exc, CallStatus.DENIED)
        await self.audit_pending(at, approval_id, expires_at, new=True)
        return self.pending(at, approval_id, expires_at)

    def _marks(self, at: Attempt) -> dict[str, Any]:
        """``secret_marks`` of the call's secret argument values, if it has any: the decision's
        note is scrubbed of them (:mod:`charter.kernel.secret_marks`)."""
        secrets = self.state.redactor_for(at.bound()).secret_values(at.arguments)
        marks = secret_marks(self.state.fingerprinter, secrets) if secrets else []
        return {"secret_marks": marks} if marks else {}

    async def audit_pending(
        self, at: Attempt, approval_id: str, expires_at: str, *, new: bool
    ) -> None:
        """The audit sinks' record of a ``pending_approval`` answer (``new``: it requested
        the approval; else the call is still waiting for one requested before)."""
        contract, ctx = at.bound(), at.ctx
        subject = Subject(
            run_id=ctx.run_id,
            context_id=ctx.context_id,
            call_id=at.call_id,
            tool_id=contract.id,
            tenant=ctx.tenant,
            tool_version=contract.version,
            fingerprint=at.fingerprint,
        )
        await audit_decision(
            self.state,
            AuditOutcome.PENDING_APPROVAL,
            subject,
            actor=at.principal.name,
            details={"approval_id": approval_id, "expires_at": expires_at, "requested": new},
        )

    def pending(self, at: Attempt, approval_id: str, expires_at: str) -> Envelope:
        return Envelope(
            call_id=at.call_id,
            status=CallStatus.PENDING_APPROVAL,
            approval={"id": approval_id, "expires_at": expires_at},
            warnings=tuple(at.warnings),
            metrics=Metrics(duration_ms=(time.perf_counter() - at.started) * 1000),
            trace=at.trace,
            context_id=at.ctx.context_id,
            run_id=at.ctx.run_id,
            tool=at.bound().id,
        )

    # -----------------------------------------------------------------------------------
    # operators' decisions

    async def find_approval(self, approval_id: str, tenant: str) -> ApprovalRow | None:
        """One approval of the tenant; past its lifetime it is ``expired`` (and recorded so)."""
        rows = await self.state.store.find_views(ApprovalRow, approval_id=approval_id, limit=1)
        if not rows:  # its row deleted outside Charter: its run is refused
            await refuse_vanished(self.state.store, "approvals", approval_id, tenant)
        if not rows or rows[0].tenant != tenant:
            return None
        row = rows[0]
        if row.status in _LIVE and self.state.now() >= _parse_at(row.expires_at):
            await self._expire(row.run_id, [row])
            return await self.state.store.read_view(ApprovalRow, row.run_id, approval_id)
        return row

    async def expire_approvals(
        self, *, tenant: str | None = None, limit: int = 1000
    ) -> list[ApprovalRow]:
        """Record ``approval_expired`` for each pending or approved (unused) approval past its
        lifetime — of one tenant, or of all — and let its run leave ``input_required`` when
        nothing else of the run waits. Safe to run from several processes at once: an
        approval another process expired or decided first is skipped. Returns the approvals
        this call expired (as they were before)."""
        now = self.state.now()
        due: dict[str, list[ApprovalRow]] = {}
        for status in sorted(_LIVE):
            where = {"status": status} if tenant is None else {"status": status, "tenant": tenant}
            for row in await self.state.store.find_views(ApprovalRow, limit=limit, **where):
                if now >= _parse_at(row.expires_at):
                    due.setdefault(row.run_id, []).append(row)
        expired: list[ApprovalRow] = []
        for run_id, rows in due.items():
            try:
                expired += await self._expire(run_id, rows)
            except LEDGER_DAMAGE as exc:  # refused and reported; the other runs go on
                skipped_damaged(logger, "approval expiry", run_id, exc)
        return expired

    async def retire_stale(self, at: Attempt) -> None:
        """``at``'s context was resolved under another Build, so its call can never run
        there: the live approval it holds (what a person approved for that Build's contract)
        is retired — ``approval_expired`` with reason ``APPROVAL_STALE`` — instead of being
        left to wait in the inbox; a context of the new Build asks again."""
        row = await self.state.call_row(at.ctx, at.call_id)
        if row is None or not row.approval_id or row.state != "pending_approval":
            return
        approval = await self.state.store.read_view(ApprovalRow, at.ctx.run_id, row.approval_id)
        if approval is None or approval.status not in _LIVE:
            return
        await self._expire(at.ctx.run_id, [approval], reason="APPROVAL_STALE")

    async def _expire(
        self,
        run_id: str,
        rows: Sequence[ApprovalRow],
        *,
        actor: str = "kernel",
        reason: str | None = None,
    ) -> list[ApprovalRow]:
        """Expire ``rows`` (approvals of one run) in one append, decided at the run's head;
        re-read and retry when a concurrent writer got in first."""
        store = self.state.store
        for _ in range(_RETRIES):
            head = await store.head(run_id)
            live = []
            for row in rows:
                current = await store.read_view(ApprovalRow, run_id, row.approval_id)
                if current is not None and current.status in _LIVE:
                    live.append(current)
            if not live:
                return []
            entries = [
                NewEvent(
                    type="approval_expired",
                    payload={
                        "approval_id": r.approval_id,
                        "context_id": r.context_id,
                        "call_id": r.call_id,
                        "actor": actor,
                        **({"reason": reason} if reason else {}),
                    },
                )
                for r in live
            ]
            entries += await self._resume_unless_waiting(run_id, {r.approval_id for r in live})
            try:
                await store.append(
                    run_id, entries, expected_seq=head.seq + 1 if head is not None else None
                )
            except (InvalidInput, StoreConflict):
                continue  # decided, consumed or expired meanwhile: look again
            return live
        return []

    async def _resume_unless_waiting(self, run_id: str, leaving: set[str]) -> list[NewEvent]:
        """``input_required → running`` when no approval of the run but ``leaving`` still
        waits (pending and within its lifetime)."""
        store = self.state.store
        run = await store.read_view(RunRow, run_id)
        if run is None or run.status != "input_required":
            return []
        now = self.state.now()
        pending = await store.find_views(ApprovalRow, run_id=run_id, status="pending", limit=10_000)
        if any(r.approval_id not in leaving and now < _parse_at(r.expires_at) for r in pending):
            return []
        return [NewEvent(type="run_status_changed", payload={"status": "running", "by": "kernel"})]

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        principal: Principal | None = None,
        token: str | None = None,
        tenant: str | None = None,
        reason: str | None = None,
        token_matches: Any = None,
    ) -> ApprovalRow:
        """Approve or reject a pending approval. Only operators (or the standalone approval
        token) may; application principals are refused with ``APPROVER_NOT_HUMAN``."""
        bounded(reason, field="reason", limit=MAX_REASON, reason="REASON_TOO_LONG")
        if principal is not None:
            if not principal.is_operator:
                raise PermissionDenied(
                    "application credentials can never approve or reject",
                    reason="APPROVER_NOT_HUMAN",
                )
            if not principal.can_approve:
                raise PermissionDenied(
                    "this operator lacks the approvals:approve permission",
                    reason="APPROVER_PERMISSION_MISSING",
                )
            actor, scope = principal.name, principal.tenant
        elif token is not None and token_matches is not None and token_matches(token):
            if tenant is None:
                raise InvalidInput(
                    "a token approval must name the tenant", reason="TENANT_REQUIRED"
                )
            actor, scope = "approval-token", tenant
        else:
            raise PermissionDenied(
                "an operator or the approval token is required", reason="APPROVER_NOT_HUMAN"
            )
        approval = await self.find_approval(approval_id, scope)
        if approval is None:
            raise PermissionDenied("no such approval", reason="APPROVAL_NOT_FOUND")
        if approval.status == "expired":
            raise PermissionDenied("the approval has expired", reason="APPROVAL_EXPIRED")
        if approval.status != "pending":
            raise InvalidInput(
                f"the approval is already {approval.status}", reason="APPROVAL_NOT_PENDING"
            )
        run_id = approval.run_id
        payload = {
            "approval_id": approval_id,
            "context_id": approval.context_id,
            "call_id": approval.call_id,
            "actor": actor,
            "reason": self._note(approval, reason) if reason else None,
        }
        if self.state.now() >= _parse_at(approval.expires_at):
            await self._expire(run_id, [approval], actor=actor)
            raise PermissionDenied("the approval has expired", reason="APPROVAL_EXPIRED")
        store = self.state.store
        decision = NewEvent(
            type="approval_approved" if approve else "approval_rejected", payload=payload
        )
        if approve:
            await store.append(run_id, [decision])
        else:
            # A rejection may resume the run; decided at ``head``, retried if the run moved.
            for _ in range(_RETRIES):
                head = await store.head(run_id)
                entries = [decision, *await self.state.resume_run(run_id, exclude=approval_id)]
                try:
                    await store.append(
                        run_id, entries, expected_seq=head.seq + 1 if head is not None else None
                    )
                    break
                except StoreConflict:
                    continue
            else:
                raise StoreConflict("the run kept changing; try again", reason="RUN_BUSY")
        decided = await self.state.store.read_view(ApprovalRow, run_id, approval_id)
        assert decided is not None
        await audit_decision(
            self.state,
            AuditOutcome.APPROVED if approve else AuditOutcome.APPROVAL_REJECTED,
            approval,
            actor=actor,
            details={
                "approval_id": approval_id,
                "requested_by": approval.requested_by,
                "note": payload["reason"],
            },
        )
        return decided

    def _note(self, approval: ApprovalRow, reason: str) -> str:
        """The decision's note as recorded: redacted, and scrubbed of the call's own secret
        argument values (recognised by the request's ``secret_marks``)."""
        marks = approval.row.get("secret_marks")
        return scrub_note(
            reason,
            marks if isinstance(marks, list) else None,
            self.state.fingerprinter,
            self.state.redactor,
        )

    async def list_approvals(
        self, *, tenant: str, status: str | None = None, limit: int = 100
    ) -> list[ApprovalRow]:
        """The tenant's approvals; those past their lifetime are expired (and recorded so)
        first, so none is listed as ``pending`` after its ``expires_at``."""
        await self.expire_approvals(tenant=tenant)
        where: dict[str, Any] = {"tenant": tenant}
        if status is not None:
            where["status"] = status
        return await self.state.store.find_views(ApprovalRow, limit=limit, **where)
