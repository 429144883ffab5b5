"""Intent, dispatch, acceptance and outcome: phases 7 to 10 of the call path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from charter.artifacts.ledger_registry import registration_event
from charter.artifacts.records import ArtifactRecord, Producer
from charter.artifacts.service import ArtifactService
from charter.contracts.model import ToolContract
from charter.contracts.tool_context import Context as ToolContext
from charter.errors import (
    Failure,
    InternalFailure,
    InvalidInput,
    PermissionDenied,
    StoreError,
)
from charter.kernel import artifacts as call_artifacts
from charter.kernel import faults
from charter.kernel.acceptance import check_result, clamp
from charter.kernel.contexts import (
    ResolvedContext,
)
from charter.kernel.core import KernelCore
from charter.kernel.envelope import TERMINAL_STATES, CallStatus, Envelope, Metrics, error_dict
from charter.kernel.executor_port import ExecutionOutcome, ExecutionRequest
from charter.kernel.principals import Principal
from charter.ledger.events import NewEvent


class Dispatcher(KernelCore):
    # Set by the runtime: the run's artifact store and the ledger-backed registry. ``None``:
    # tools that declare artifacts get no writer (``ctx.artifacts`` is None).
    artifacts: ArtifactService | None = None

    async def _intent(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        contract: ToolContract,
        call_id: str,
        fingerprint: str,
        summary: Any,
        approval: Mapping[str, Any] | None,
        task_id: str | None,
        would: list[dict[str, str]],
    ) -> str:
        """Commit the ``dispatching`` intent durably; return the executor's idempotency key."""
        idem_key = self._idempotency_key(ctx, call_id, fingerprint)
        entries: list[NewEvent] = []
        payload: dict[str, Any] = {
            "stage": "started",
            "context_id": ctx.context_id,
            "call_id": call_id,
            "tool_id": contract.id,
            "tool_version": contract.version,
            "contract_digest": contract.digest,
            "fingerprint": fingerprint,
            "tenant": ctx.tenant,
            "actor": principal.name,
            "summary": summary,
            "idempotency_key": idem_key,
            "owner": self._owner,
            "task_id": task_id,
            "mode": self.settings.mode.value,
            "run_call_budget": self.settings.run_call_budget,
        }
        if would:
            payload["execution_audit"] = {"would": would}
        if approval is not None:
            payload["approval_id"] = approval["approval_id"]
            entries.append(
                NewEvent(
                    type="approval_consumed",
                    payload={
                        "approval_id": approval["approval_id"],
                        "context_id": ctx.context_id,
                        "call_id": call_id,
                    },
                )
            )
            entries += await self._resume_run(ctx.run_id, exclude=approval["approval_id"])
        entries.append(NewEvent(type="tool_progress", payload=payload))
        await self.store.append(ctx.run_id, entries)
        return idem_key

    async def _execute(
        self,
        contract: ToolContract,
        request: ExecutionRequest,
        run_id: str,
        call_id: str,
        ctx: ResolvedContext,
    ) -> ExecutionOutcome:
        kind = self.bindings.get(contract.id, "python")
        executor = self.executors.get(kind)
        if executor is None:
            return ExecutionOutcome(
                status="failed",
                error=InternalFailure(
                    f"no executor of kind {kind!r} is configured", reason="EXECUTOR_MISSING"
                ),
                dispatched=False,
            )
        retry = contract.read_only and bool(contract.annotations.idempotent)
        attempts = self.settings.read_retry_attempts if retry else 1
        backoff = self.settings.read_retry_backoff_s
        outcome: ExecutionOutcome | None = None
        for attempt in range(1, attempts + 1):
            outcome = await executor.execute(request)
            transient = outcome.status == "unknown" or (
                outcome.error is not None and outcome.error.code.value == "transient_external"
            )
            if outcome.status == "succeeded" or not transient or attempt == attempts:
                return replace(outcome, attempts=attempt)
            await self.store.append(
                run_id,
                [
                    NewEvent(
                        type="tool_progress",
                        payload={
                            "stage": "retrying",
                            "context_id": ctx.context_id,
                            "call_id": call_id,
                            "attempt": attempt + 1,
                            "reason": outcome.reason,
                        },
                    )
                ],
            )
            await asyncio.sleep(backoff * (2 ** (attempt - 1)))
        assert outcome is not None
        return outcome

    async def _dispatch(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        contract: ToolContract,
        call_id: str,
        arguments: Mapping[str, Any],
        fingerprint: str,
        idem_key: str,
        started: float,
        trace: dict[str, str],
        task_id: str | None,
        warnings: list[str],
    ) -> Envelope:
        files: call_artifacts.RunFiles | None = None
        service = self.artifacts
        if (
            contract.artifacts is not None
            and service is not None
            and self.bindings.get(contract.id, "python") == "python"
        ):
            inputs = await call_artifacts.check_inputs(
                service, ctx.run_id, contract, arguments, verify=False
            )
            files = call_artifacts.RunFiles(service, ctx.run_id, contract, inputs)
        tool_ctx = ToolContext(
            call_id=call_id,
            idempotency_key=idem_key,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool_id=contract.id,
            tenant=ctx.tenant,
            principal=principal.name,
            agent=ctx.agent,
            task_id=task_id,
            trace_id=trace["trace_id"],
            span_id=trace["span_id"],
            artifacts=files,
        )
        request = ExecutionRequest(
            contract=contract,
            arguments=arguments,
            context=tool_ctx,
            deadline_s=contract.timeout_s,
        )
        if contract.read_only:
            outcome = await self._execute(contract, request, ctx.run_id, call_id, ctx)
        else:
            async with self.store.run_lock(ctx.run_id):
                outcome = await self._execute(contract, request, ctx.run_id, call_id, ctx)
        faults.point("after_result", contract.id)
        status, data, error, output_bytes = self._accept(contract, arguments, outcome, warnings)
        registered: list[ArtifactRecord] = []
        artifact_ids: list[str] = []
        if files is not None and service is not None:
            written = await call_artifacts.seal(files)
            if status is CallStatus.SUCCEEDED and written:
                producer = Producer(task_id=task_id, tool_id=contract.id, call_id=call_id)
                try:
                    registered, artifact_ids = await call_artifacts.records_for(
                        service, ctx.run_id, written, producer
                    )
                except Failure as exc:
                    status, data, error, output_bytes = CallStatus.FAILED, None, exc, 0
            if status is not CallStatus.SUCCEEDED and written:
                await service.rollback(ctx.run_id, [w.stored for w in written])
        envelope = await self._finish(
            ctx,
            principal,
            contract,
            call_id,
            fingerprint,
            started,
            trace,
            status,
            data,
            error,
            output_bytes,
            outcome.attempts,
            warnings,
            registered=registered,
            artifact_ids=artifact_ids,
        )
        if envelope.status is not CallStatus.SUCCEEDED and artifact_ids and service is not None:
            # The outcome could not be recorded: nothing was registered; remove the files.
            await service.rollback(ctx.run_id, [r.stored() for r in registered])
        return envelope

    def _accept(
        self,
        contract: ToolContract,
        arguments: Mapping[str, Any],
        outcome: ExecutionOutcome,
        warnings: list[str],
    ) -> tuple[CallStatus, Any, Failure | None, int]:
        if outcome.status == "unknown":
            return CallStatus.UNKNOWN, None, outcome.error, 0
        if outcome.status == "failed":
            return CallStatus.FAILED, None, outcome.error, 0
        try:
            check_result(outcome.result, self._result_schema(contract))
            redactor = self._redactor_for(contract)
            # A tool may echo a secret argument under an innocent key: scrub those values too.
            secrets = redactor.secret_values(arguments)
            if secrets:
                redactor = redactor.remember(secrets)
            redacted = redactor.redact(outcome.result)
            accepted = clamp(redacted, contract)
        except Failure as exc:
            return CallStatus.FAILED, None, exc, 0
        warnings.extend(accepted.warnings)
        return CallStatus.SUCCEEDED, accepted.data, None, accepted.output_bytes

    async def _finish(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        contract: ToolContract,
        call_id: str,
        fingerprint: str,
        started: float,
        trace: dict[str, str],
        status: CallStatus,
        data: Any,
        error: Failure | None,
        output_bytes: int,
        attempts: int,
        warnings: list[str],
        *,
        registered: Sequence[ArtifactRecord] = (),
        artifact_ids: Sequence[str] = (),
    ) -> Envelope:
        duration_ms = (time.perf_counter() - started) * 1000
        err = self._safe_error(error)
        receipt = {
            "status": status.value,
            "data": data,
            "error": err,
            "warnings": list(warnings),
            "artifact_ids": list(artifact_ids),
            "output_bytes": output_bytes,
            "attempts": attempts,
            "duration_ms": round(duration_ms, 3),
        }
        stage = {CallStatus.SUCCEEDED: "completed", CallStatus.FAILED: "failed"}.get(
            status, "unknown"
        )
        entries = [
            *(registration_event(r) for r in registered),
            NewEvent(
                type="tool_progress",
                payload={
                    "stage": stage,
                    "context_id": ctx.context_id,
                    "call_id": call_id,
                    "receipt": receipt,
                },
            ),
            self._audit_entry(
                ctx,
                principal,
                contract.id,
                call_id,
                status.value,
                err["reason"] if err else None,
                fingerprint,
                duration_ms,
                code=err["code"] if err else None,
                contract=contract,
            ),
        ]
        try:
            await self.store.append(ctx.run_id, entries)
        except StoreError:
            # The effect may have happened; the outcome could not be recorded. Say so: on
            # restart the call is reconciled to unknown, never dispatched again.
            status = CallStatus.UNKNOWN
            artifact_ids = ()
            err = error_dict(
                InternalFailure("the outcome could not be recorded", reason="OUTCOME_NOT_RECORDED")
            )
        await self._sink(
            ctx,
            self._audit_entry(
                ctx,
                principal,
                contract.id,
                call_id,
                status.value,
                err["reason"] if err else None,
                fingerprint,
                duration_ms,
                code=err["code"] if err else None,
                contract=contract,
            ),
        )
        return Envelope(
            call_id=call_id,
            status=status,
            data=data,
            artifact_ids=tuple(artifact_ids),
            warnings=tuple(warnings),
            error=err,
            metrics=Metrics(
                duration_ms=duration_ms, cached=False, attempts=attempts, output_bytes=output_bytes
            ),
            trace=trace,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool=contract.id,
        )

    async def _coalesce(
        self,
        ctx: ResolvedContext,
        contract: ToolContract,
        row: Mapping[str, Any],
        started: float,
        trace: dict[str, str],
    ) -> Envelope:
        """Wait for an in-flight duplicate to finish and answer with its outcome."""
        deadline = time.monotonic() + contract.timeout_s + self.settings.coalesce_grace_s
        current: Mapping[str, Any] | None = row
        while current is not None and current["state"] not in TERMINAL_STATES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            head = await self.store.head(ctx.run_id)
            await self.store.wait_for_events(
                ctx.run_id, after=head.seq if head else 0, timeout=min(remaining, 0.5)
            )
            current = await self._call_row(ctx, row["call_id"])
        if current is not None and current["state"] in TERMINAL_STATES:
            return self._receipt(current, started, trace, cached=True)
        return Envelope(
            call_id=row["call_id"],
            status=CallStatus.DISPATCHING,
            warnings=("IN_FLIGHT: the same call is still running; ask again later",),
            metrics=Metrics(duration_ms=(time.perf_counter() - started) * 1000, cached=True),
            trace=trace,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool=contract.id,
        )

    async def _ungoverned(
        self,
        ctx: ResolvedContext,
        principal: Principal,
        contract: ToolContract | None,
        tool: str,
        call_id: str,
        arguments: str | bytes | Mapping[str, Any],
        started: float,
        trace: dict[str, str],
        task_id: str | None,
    ) -> Envelope:
        """Mode ``off``: run the tool directly, record nothing."""
        if contract is None:
            return self._answer(
                call_id,
                CallStatus.DENIED,
                started,
                trace,
                error=PermissionDenied(
                    "this context does not offer that tool", reason="TOOL_NOT_DISCLOSED"
                ),
            )
        try:
            accepted = (
                self._intake(contract).accept(arguments)
                if isinstance(arguments, str | bytes)
                else self._intake(contract).accept_value(arguments)
            )
        except InvalidInput as exc:
            return self._answer(call_id, CallStatus.REJECTED, started, trace, error=exc)
        tool_ctx = ToolContext(
            call_id=call_id,
            idempotency_key=self._idempotency_key(ctx, call_id, accepted.fingerprint),
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool_id=contract.id,
            tenant=ctx.tenant,
            principal=principal.name,
            task_id=task_id,
        )
        executor = self.executors.get(self.bindings.get(contract.id, "python"))
        if executor is None:
            return self._answer(
                call_id,
                CallStatus.FAILED,
                started,
                trace,
                error=InternalFailure("no executor", reason="EXECUTOR_MISSING"),
            )
        outcome = await executor.execute(
            ExecutionRequest(
                contract=contract,
                arguments=accepted.arguments,
                context=tool_ctx,
                deadline_s=contract.timeout_s,
            )
        )
        status, data, error, size = self._accept(contract, accepted.arguments, outcome, [])
        return Envelope(
            call_id=call_id,
            status=status,
            data=data,
            error=self._safe_error(error),
            metrics=Metrics(
                duration_ms=(time.perf_counter() - started) * 1000,
                attempts=outcome.attempts,
                output_bytes=size,
            ),
            trace=trace,
            tool=contract.id,
        )
