"""Answers and audit records: how the kernel says what it decided about a call.

Every envelope the kernel answers with is built here, and every ``tool_call_recorded`` audit
entry; refusals before a reservation are recorded (ledger, then audit sinks) and answered in
one step by :meth:`Answers.refuse`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from charter.contracts.fastinit import maker
from charter.errors import Failure, InternalFailure, InvalidInput, PermissionDenied, StoreError
from charter.kernel.audit import AuditOutcome, AuditRecord
from charter.kernel.authorize import Denial
from charter.kernel.contexts import ResolvedContext
from charter.kernel.core import Arrival, Attempt, KernelState
from charter.kernel.envelope import CallStatus, Envelope, Metrics, error_dict
from charter.ledger.events import NewEvent
from charter.ledger.views import CallRow

_make_event = maker(NewEvent)  # an audit entry per governed call (contracts/fastinit.py)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


class Answers:
    """Builds the kernel's envelopes and records its audit entries."""

    def __init__(self, state: KernelState) -> None:
        self.state = state

    def safe_error(self, error: Failure | None) -> dict[str, Any] | None:
        if error is None:
            return None
        out = error_dict(error)
        out["message"] = self.state.redactor.redact_text(out["message"])
        return out

    def answer(
        self,
        call: Arrival,
        status: CallStatus,
        error: Failure | None = None,
        *,
        tool: str | None = None,
        ctx: ResolvedContext | None = None,
    ) -> Envelope:
        """An answer that carries no result: a refusal, a failure, nothing dispatched."""
        return Envelope(
            call_id=call.call_id,
            status=status,
            error=self.safe_error(error),
            metrics=Metrics(duration_ms=_ms_since(call.started)),
            trace=call.trace,
            context_id=ctx.context_id if ctx else None,
            run_id=ctx.run_id if ctx else None,
            tool=tool,
        )

    def receipt(self, row: CallRow, call: Arrival, *, cached: bool) -> Envelope:
        """The recorded outcome of a call (its projection row) as an answer."""
        receipt = row.receipt or {}
        return Envelope(
            call_id=row.call_id,
            status=CallStatus(row.state),
            data=receipt.get("data"),
            artifact_ids=tuple(receipt.get("artifact_ids", ())),
            warnings=tuple(receipt.get("warnings", ())),
            error=receipt.get("error"),
            metrics=Metrics(
                duration_ms=_ms_since(call.started),
                cached=cached,
                attempts=int(receipt.get("attempts", 0)),
                output_bytes=int(receipt.get("output_bytes", 0)),
            ),
            trace=call.trace,
            context_id=row.context_id,
            run_id=row.run_id,
            tool=row.tool_id,
        )

    # -----------------------------------------------------------------------------------
    # answers that record a decision

    async def cached(self, row: CallRow, at: Attempt) -> Envelope:
        """A finished call's recorded receipt, answered again: audited as ``cached``."""
        envelope = self.receipt(row, at, cached=True)
        await self.audit(at, "cached", _ms_since(at.started), reason=None, code=None)
        return envelope

    async def refuse(self, at: Attempt, error: Failure, status: CallStatus) -> Envelope:
        """A refusal before any reservation: audited, nothing reserved or dispatched.

        The audit entry names the tool only once ``at.contract`` is set: a tool the context
        did not offer (or that authorization refused outright) is never named in the ledger.
        """
        contract = at.contract
        await self.audit(
            at,
            status.value,
            _ms_since(at.started),
            reason=error.reason,
            code=error.code.value,
        )
        return self.answer(at, status, error, tool=contract.id if contract else None, ctx=at.ctx)

    async def deny(self, at: Attempt, denial: Denial) -> Envelope:
        error: Failure = (
            InternalFailure(denial.message, reason=denial.reason)
            if denial.internal
            else PermissionDenied(denial.message, reason=denial.reason)
        )
        return await self.refuse(at, error, CallStatus.DENIED)

    async def conflict(self, at: Attempt, tool_id: str | None = None) -> Envelope:
        """The call id was reserved with other arguments (or for another tool); ``tool_id``
        names the tool when the attempt has no contract (a context of another Build)."""
        tool = tool_id if tool_id is not None else at.bound().id
        error = InvalidInput(
            "this call id was already used with different arguments; the original is untouched",
            reason="IDEMPOTENCY_CONFLICT",
        )
        await self.audit(
            at, "conflict", _ms_since(at.started), reason=error.reason, code=error.code.value
        )
        return self.answer(at, CallStatus.CONFLICT, error, tool=tool, ctx=at.ctx)

    # -----------------------------------------------------------------------------------
    # audit

    def audit_entry(
        self,
        at: Attempt,
        outcome: str,
        duration_ms: float,
        *,
        reason: str | None = None,
        code: str | None = None,
        versioned: bool = False,
    ) -> NewEvent:
        """The ledger's audit record of a decision; ``versioned`` names the tool's version
        (outcomes of dispatched calls do, refusals do not)."""
        contract = at.contract
        payload = {
            "context_id": at.ctx.context_id,
            "call_id": at.call_id,
            "tool_id": contract.id if contract is not None else "(undisclosed)",
            "tool_version": contract.version if versioned and contract else None,
            "actor": at.principal.name,
            "tenant": at.principal.tenant,
            "outcome": outcome,
            "code": code,
            "reason": reason,
            "fingerprint": at.fingerprint,
            "duration_ms": round(duration_ms, 3),
            "mode": at.mode or self.state.settings.mode.value,
        }
        if at.parent_span_id:
            payload["parent_span_id"] = at.parent_span_id
        return _make_event(type="tool_call_recorded", payload=payload, at=None)

    async def audit(
        self,
        at: Attempt,
        outcome: str,
        duration_ms: float,
        *,
        reason: str | None = None,
        code: str | None = None,
    ) -> None:
        """Record a decision in the ledger and hand it to the audit sinks."""
        entry = self.audit_entry(at, outcome, duration_ms, reason=reason, code=code)
        # The ledger is the audit trail of record; if it fails, the answer still goes out.
        with contextlib.suppress(StoreError):
            await self.state.store.append(at.ctx.run_id, [entry])
        await self.sink(at.ctx, entry)

    async def sink(self, ctx: ResolvedContext, entry: NewEvent) -> None:
        """Hand the ledger's audit record (a ``tool_call_recorded`` entry) to the audit sinks."""
        audit = self.state.audit
        if audit is None:
            return
        p = entry.payload
        record = AuditRecord(
            at=self.state.now(),
            actor=p["actor"],
            tenant=p["tenant"],
            tool=p["tool_id"],
            tool_version=p["tool_version"],
            call_id=p["call_id"],
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            outcome=p["outcome"],
            code=p["code"],
            reason=p["reason"],
            fingerprint=p["fingerprint"],
            duration_ms=p["duration_ms"],
            mode=p["mode"],
            details={},
        )
        await audit.record(record)


class AuditSubject(Protocol):
    """The call a decision is about: a :class:`~charter.ledger.views.CallRow` or
    :class:`~charter.ledger.views.ApprovalRow` has these fields, or a :class:`Subject`."""

    @property
    def run_id(self) -> str: ...
    @property
    def context_id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def tool_id(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def tool_version(self) -> str | None: ...
    @property
    def fingerprint(self) -> str | None: ...


class Subject(NamedTuple):
    run_id: str
    context_id: str
    call_id: str
    tool_id: str
    tenant: str
    tool_version: str | None
    fingerprint: str | None


async def audit_decision(
    state: KernelState,
    outcome: AuditOutcome,
    subject: AuditSubject,
    *,
    actor: str,
    details: Mapping[str, Any],
) -> None:
    """Hand the audit sinks a decision that is not a call's own answer: an approval requested
    or decided, an unknown call resolved by an operator (the ledger holds each as its event).
    ``details`` must already be redacted."""
    if state.audit is None:
        return
    await state.audit.record(
        AuditRecord(
            at=state.now(),
            actor=actor,
            tenant=subject.tenant,
            tool=subject.tool_id,
            tool_version=subject.tool_version,
            call_id=subject.call_id,
            context_id=subject.context_id,
            run_id=subject.run_id,
            outcome=outcome,
            fingerprint=subject.fingerprint or None,
            mode=state.settings.mode.value,
            details=details,
        )
    )
