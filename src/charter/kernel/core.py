"""Shared state and small helpers of the kernel: ids, time, intake, answers, audit."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from charter.contracts.canonical import Fingerprinter, canonical_bytes
from charter.contracts.intake import Intake
from charter.contracts.model import ToolContract
from charter.contracts.schema import CompiledSchema, compile_schema
from charter.errors import (
    Failure,
    InvalidInput,
    PermissionDenied,
    ResourceLimit,
    StoreError,
)
from charter.kernel.audit import AuditRecord, AuditSink
from charter.kernel.authorize import Denial, Hook
from charter.kernel.contexts import (
    ContextProvider,
    ResolvedContext,
)
from charter.kernel.envelope import CallStatus, Envelope, Metrics, error_dict
from charter.kernel.executor_port import Executor
from charter.kernel.principals import Principal
from charter.kernel.redaction import Redactor
from charter.kernel.settings import KernelSettings
from charter.kernel.store import KernelStore
from charter.ledger.calls_projection import call_key
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import NewEvent
from charter.ledger.ids import new_id
from charter.ledger.projections import run_key
from charter.project.build import Build


def _parse_at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _process_start() -> str:
    """A token that changes when the pid is reused: the process start time from /proc."""
    try:
        with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return str(time.time_ns())


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call being decided: what every answer and audit record about it needs."""

    ctx: ResolvedContext
    principal: Principal
    tool: str
    call_id: str
    started: float
    trace: dict[str, str]


class KernelCore:
    """State every part of the kernel shares; see :class:`charter.kernel.kernel.Kernel`."""

    def __init__(
        self,
        *,
        build: Build,
        store: KernelStore,
        fingerprinter: Fingerprinter,
        executors: Mapping[str, Executor],
        bindings: Mapping[str, str],
        settings: KernelSettings | None = None,
        redactor: Redactor | None = None,
        audit: AuditSink | None = None,
        providers: Mapping[str, ContextProvider] | None = None,
        ownership_hooks: Sequence[Hook] = (),
        clock: Clock = system_clock,
        hex_source: Any = None,
    ) -> None:
        self.build = build
        self.store = store
        self.fingerprinter = fingerprinter
        self.executors = dict(executors)
        self.bindings = dict(bindings)
        self.settings = settings or KernelSettings()
        self.redactor = redactor or Redactor()
        self.audit = audit
        self.providers = dict(providers or {})
        self.ownership_hooks = tuple(ownership_hooks)
        self.clock = clock
        self._hex = hex_source
        self._intakes: dict[str, Intake] = {}
        self._redactors: dict[str, Redactor] = {}
        self._run_created: dict[str, datetime] = {}
        self._random = random.Random()
        self._result_schemas: dict[str, CompiledSchema | None] = {}
        self._contexts: dict[str, ResolvedContext] = {}
        self._context_runs: dict[str, str] = {}
        self._owner = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "start": _process_start(),
        }

    # -----------------------------------------------------------------------------------
    # ids and time

    def _id(self, slug: str) -> str:
        return new_id(slug, hex_source=self._hex) if self._hex else new_id(slug)

    def _trace_id(self, slug: str) -> str:
        """Trace and span ids identify, they do not authorize: no system entropy needed."""
        if self._hex:
            return new_id(slug, hex_source=self._hex)
        return f"{slug}-{self._random.getrandbits(48):012x}"

    def _now(self) -> datetime:
        return self.clock()

    # -----------------------------------------------------------------------------------
    # phase helpers

    def _intake(self, contract: ToolContract) -> Intake:
        intake = self._intakes.get(contract.digest)
        if intake is None:
            intake = Intake(contract.args_schema, self.fingerprinter)
            self._intakes[contract.digest] = intake
        return intake

    def _result_schema(self, contract: ToolContract) -> CompiledSchema | None:
        if contract.digest not in self._result_schemas:
            self._result_schemas[contract.digest] = (
                compile_schema(contract.result_schema) if contract.result_schema else None
            )
        return self._result_schemas[contract.digest]

    def _redactor_for(self, contract: ToolContract) -> Redactor:
        """The deployment's redactor plus the contract's ``redact`` pointers (cached)."""
        redactor = self._redactors.get(contract.digest)
        if redactor is None:
            redactor = self.redactor.with_pointers(contract.redact)
            self._redactors[contract.digest] = redactor
        return redactor

    def _summary(self, contract: ToolContract, arguments: Mapping[str, Any]) -> Any:
        redacted = self._redactor_for(contract).redact(dict(arguments))
        if len(canonical_bytes(redacted)) > self.settings.summary_max_bytes:
            return {"truncated": True, "maxBytes": self.settings.summary_max_bytes}
        return redacted

    async def _call_row(self, ctx: ResolvedContext, call_id: str) -> dict[str, Any] | None:
        return await self.store.get_row(call_key(ctx.run_id, ctx.context_id, call_id))

    async def _elapsed_budget(self, ctx: ResolvedContext) -> Failure | None:
        limit = self.settings.run_elapsed_budget_s
        if limit is None:
            return None
        created = self._run_created.get(ctx.run_id)
        if created is None:
            run = await self.store.get_row(run_key(ctx.run_id))
            if run is None:
                return None
            created = self._run_created[ctx.run_id] = _parse_at(run["created_at"])
        elapsed = (self._now() - created).total_seconds()
        if elapsed > limit:
            return ResourceLimit(
                f"the run is past its elapsed-time budget of {limit} s",
                reason="RUN_TIME_BUDGET_EXCEEDED",
                details={"limit_s": limit},
            )
        return None

    def _idempotency_key(self, ctx: ResolvedContext, call_id: str, fingerprint: str) -> str:
        raw = f"{ctx.context_id}\x00{call_id}\x00{fingerprint}".encode()
        return "idk-" + hashlib.sha256(raw).hexdigest()[:40]

    async def _resume_run(self, run_id: str, *, exclude: str) -> list[NewEvent]:
        """``input_required → running`` once no other approval of the run is pending."""
        run = await self.store.get_row(run_key(run_id))
        if run is None or run["status"] != "input_required":
            return []
        pending = await self.store.query_rows("approvals", {"run_id": run_id, "status": "pending"})
        if any(r["approval_id"] != exclude for r in pending):
            return []
        return [NewEvent(type="run_status_changed", payload={"status": "running", "by": "kernel"})]

    def _safe_error(self, error: Failure | None) -> dict[str, Any] | None:
        if error is None:
            return None
        out = error_dict(error)
        out["message"] = self.redactor.redact_text(out["message"])
        return out

    def _receipt(
        self, row: Mapping[str, Any], started: float, trace: dict[str, str], *, cached: bool
    ) -> Envelope:
        receipt = row.get("receipt") or {}
        return Envelope(
            call_id=row["call_id"],
            status=CallStatus(row["state"]),
            data=receipt.get("data"),
            artifact_ids=tuple(receipt.get("artifact_ids", ())),
            warnings=tuple(receipt.get("warnings", ())),
            error=receipt.get("error"),
            metrics=Metrics(
                duration_ms=(time.perf_counter() - started) * 1000,
                cached=cached,
                attempts=int(receipt.get("attempts", 0)),
                output_bytes=int(receipt.get("output_bytes", 0)),
            ),
            trace=trace,
            context_id=row["context_id"],
            run_id=row["run_id"],
            tool=row["tool_id"],
        )

    # -----------------------------------------------------------------------------------
    # answers that record a decision

    async def _refused(
        self,
        at: Attempt,
        error: Failure,
        status: CallStatus,
        *,
        contract: ToolContract | None = None,
        fingerprint: str | None = None,
    ) -> Envelope:
        """:meth:`_refuse` for an :class:`Attempt` (the call path's shorthand)."""
        return await self._refuse(
            at.ctx,
            at.principal,
            at.tool,
            at.call_id,
            at.started,
            at.trace,
            error,
            status,
            contract=contract,
            fingerprint=fingerprint,
        )

    async def _denied(
        self,
        at: Attempt,
        denial: Denial,
        *,
        contract: ToolContract | None = None,
        fingerprint: str | None = None,
    ) -> Envelope:
        error = PermissionDenied(denial.message, reason=denial.reason)
        return await self._refused(
            at, error, CallStatus.DENIED, contract=contract, fingerprint=fingerprint
        )

    def _answer(
        self,
        call_id: str,
        status: CallStatus,
        started: float,
        trace: dict[str, str],
        *,
        tool: str | None = None,
        error: Failure | None = None,
        ctx: ResolvedContext | None = None,
    ) -> Envelope:
        return Envelope(
            call_id=call_id,
            status=status,
            error=self._safe_error(error),
            metrics=Metrics(duration_ms=(time.perf_counter() - started) * 1000),
            trace=trace,
            context_id=ctx.context_id if ctx else None,
            run_id=ctx.run_id if ctx else None,
            tool=tool,
        )

    async def _deny(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        tool: str,
        call_id: str,
        started: float,
        trace: dict[str, str],
        denial: Denial,
        *,
        contract: ToolContract | None = None,
        fingerprint: str | None = None,
    ) -> Envelope:
        error = PermissionDenied(denial.message, reason=denial.reason)
        return await self._refuse(
            ctx,
            principal,
            tool,
            call_id,
            started,
            trace,
            error,
            CallStatus.DENIED,
            contract=contract,
            fingerprint=fingerprint,
        )

    async def _refuse(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        tool: str,
        call_id: str,
        started: float,
        trace: dict[str, str],
        error: Failure,
        status: CallStatus,
        *,
        contract: ToolContract | None = None,
        fingerprint: str | None = None,
    ) -> Envelope:
        """A refusal before any reservation: audited, nothing reserved or dispatched."""
        # Never name a tool the context did not offer in the ledger under its real id.
        tool_label = contract.id if contract is not None else "(undisclosed)"
        duration_ms = (time.perf_counter() - started) * 1000
        await self._audit_event(
            ctx,
            principal,
            tool_label,
            call_id,
            status.value,
            error.reason,
            fingerprint,
            duration_ms,
            code=error.code.value,
        )
        return self._answer(
            call_id,
            status,
            started,
            trace,
            tool=contract.id if contract else None,
            error=error,
            ctx=ctx,
        )

    async def _conflict(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        contract: ToolContract,
        call_id: str,
        started: float,
        trace: dict[str, str],
        fingerprint: str,
    ) -> Envelope:
        error = InvalidInput(
            "this call id was already used with different arguments; the original is untouched",
            reason="IDEMPOTENCY_CONFLICT",
        )
        await self._audit_event(
            ctx,
            principal,
            contract.id,
            call_id,
            "conflict",
            error.reason,
            fingerprint,
            (time.perf_counter() - started) * 1000,
            code=error.code.value,
        )
        return self._answer(
            call_id, CallStatus.CONFLICT, started, trace, tool=contract.id, error=error, ctx=ctx
        )

    def _audit_entry(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        tool: str,
        call_id: str,
        outcome: str,
        reason: str | None,
        fingerprint: str | None,
        duration_ms: float,
        *,
        code: str | None = None,
        contract: ToolContract | None = None,
    ) -> NewEvent:
        return NewEvent(
            type="tool_call_recorded",
            payload={
                "context_id": ctx.context_id,
                "call_id": call_id,
                "tool_id": tool,
                "tool_version": contract.version if contract else None,
                "actor": principal.name,
                "tenant": principal.tenant,
                "outcome": outcome,
                "code": code,
                "reason": reason,
                "fingerprint": fingerprint,
                "duration_ms": round(duration_ms, 3),
                "mode": self.settings.mode.value,
            },
        )

    async def _audit_event(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        tool: str,
        call_id: str,
        outcome: str,
        reason: str | None,
        fingerprint: str | None,
        duration_ms: float,
        *,
        code: str | None = None,
    ) -> None:
        entry = self._audit_entry(
            ctx, principal, tool, call_id, outcome, reason, fingerprint, duration_ms, code=code
        )
        # The ledger is the audit trail of record; if it fails, the answer still goes out.
        with contextlib.suppress(StoreError):
            await self.store.append(ctx.run_id, [entry])
        await self._sink(ctx, entry)

    async def _sink(self, ctx: ResolvedContext, entry: NewEvent) -> None:
        """Hand the ledger's audit record (a ``tool_call_recorded`` entry) to the audit sinks."""
        if self.audit is None:
            return
        p = entry.payload
        record = AuditRecord(
            at=self._now(),
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
        await self.audit.record(record)

    async def get_context(self, context_id: str) -> ResolvedContext | None:
        cached = self._contexts.get(context_id)
        if cached is not None:
            return cached
        rows = await self.store.query_rows("contexts", {"context_id": context_id}, limit=1)
        if not rows:
            return None
        context = ResolvedContext.from_row(rows[0])
        self._contexts[context_id] = context
        return context
