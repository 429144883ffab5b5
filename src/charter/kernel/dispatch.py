"""Intent, dispatch, acceptance and outcome: phases 7 to 10 of the call path."""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Awaitable, Generator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any, NamedTuple

from charter.artifacts.ledger_registry import registration_event
from charter.artifacts.records import ArtifactRecord, Producer
from charter.contracts.delegation import CURRENT_SPAN
from charter.contracts.fastinit import maker
from charter.contracts.model import ToolContract
from charter.contracts.tool_context import CancelFlag
from charter.contracts.tool_context import Context as ToolContext
from charter.errors import (
    Failure,
    InternalFailure,
    InvalidInput,
    PermissionDenied,
    StoreError,
)
from charter.kernel import artifacts as call_artifacts
from charter.kernel import faults, flight
from charter.kernel.acceptance import check_result, clamp
from charter.kernel.answers import Answers
from charter.kernel.core import Attempt, KernelState
from charter.kernel.envelope import TERMINAL_STATES, CallStatus, Envelope, Metrics, error_dict
from charter.kernel.executor_port import ExecutionOutcome, ExecutionRequest
from charter.kernel.late import record_late_result
from charter.kernel.operators import settle_stranded
from charter.kernel.progress import ProgressChannel
from charter.kernel.redaction import Redactor
from charter.kernel.secret_marks import secret_marks
from charter.ledger.events import NewEvent
from charter.ledger.views import ApprovalRow, CallRow

# The ``tool_progress`` stage that records an outcome, by its status (else ``unknown``).
_STAGES = {CallStatus.SUCCEEDED.value: "completed", CallStatus.FAILED.value: "failed"}
_STATUS_VALUES = {status: status.value for status in CallStatus}
_new_tuple = tuple.__new__


@types.coroutine
def _yield_once() -> Generator[None, None, None]:
    """One bare yield: the task runs again at the event loop's next round."""
    yield


# What every dispatched call makes once (kernel/fastinit.py: the same frozen objects, faster).
_make_tool_context = maker(ToolContext)
_make_request = maker(ExecutionRequest)
_make_envelope = maker(Envelope)
_make_metrics = maker(Metrics)
_make_event = maker(NewEvent)


class Settled(NamedTuple):
    """What acceptance made of an execution outcome: the call's status and result."""

    status: CallStatus
    data: Any = None
    error: Failure | None = None
    output_bytes: int = 0
    attempts: int = 0


class Dispatcher:
    """Commits a call's intent, runs it on its executor, accepts and records the outcome."""

    def __init__(self, state: KernelState, answers: Answers) -> None:
        self.state = state
        self.answers = answers
        self._lingering: set[asyncio.Task[None]] = set()  # write locks held for a thread
        self._vouched: tuple[object, bool] = (None, False)  # (store, flight.in_place(store))

    def _in_place(self) -> bool:
        """``flight.in_place`` of the kernel's store, asked again only when it is another."""
        store, vouched = self._vouched
        if store is not self.state.store:
            store = self.state.store
            self._vouched = store, (vouched := flight.in_place(store))
        return vouched

    async def intent(self, at: Attempt, approval: ApprovalRow | None) -> None:
        """Commit the ``dispatching`` intent durably; set the executor's idempotency key."""
        state, ctx, contract = self.state, at.ctx, at.bound()
        assert at.fingerprint is not None
        idem_key = state.idempotency_key(ctx, at.call_id, at.fingerprint)
        entries: list[NewEvent] = []
        expected: int | None = None
        payload: dict[str, Any] = {
            "stage": "started",
            "context_id": ctx.context_id,
            "call_id": at.call_id,
            "tool_id": contract.id,
            "tool_version": contract.version,
            "contract_digest": contract.digest,
            "fingerprint": at.fingerprint,
            "tenant": ctx.tenant,
            "actor": at.principal.name,
            "arguments": at.summary.record,  # shape + audit fields, never other values
            "idempotency_key": idem_key,
            "owner": state.owner,
            "task_id": at.task_id,
            "mode": at.mode or state.settings.mode.value,
            "run_call_budget": state.settings.run_call_budget,
            "span_id": at.trace["span_id"],
        }
        if at.parent_span_id is not None:
            payload["parent_span_id"] = at.parent_span_id
        if at.redactor is not None and at.redactor is not state.redactor_for(contract):
            # the call has secret arguments: an operator's note resolving it is scrubbed of
            # them (kernel/secret_marks.py)
            secrets = state.redactor_for(contract).secret_values(at.arguments)
            marks = secret_marks(state.fingerprinter, secrets)
            if marks:
                payload["secret_marks"] = marks
        if contract.delegates_execution:
            payload["delegates_execution"] = True
        if at.would:
            payload["execution_audit"] = {"would": at.would}
        if approval is not None:
            payload["approval_id"] = approval.approval_id
            entries.append(
                NewEvent(
                    type="approval_consumed",
                    payload={
                        "approval_id": approval.approval_id,
                        "context_id": ctx.context_id,
                        "call_id": at.call_id,
                    },
                )
            )
            # Whether consuming it resumes the run is decided at ``head``: the append must
            # follow it directly (StoreConflict otherwise: the caller decides again).
            head = await state.store.head(ctx.run_id)
            expected = head.seq + 1 if head is not None else None
            entries += await state.resume_run(ctx.run_id, exclude=approval.approval_id)
        entries.append(_make_event(type="tool_progress", payload=payload, at=None))
        flight.take_off(state.flying, at.flight, (ctx.context_id, at.call_id))
        at.flight.phase = flight.INTENT
        work = state.store.append(ctx.run_id, entries, expected_seq=expected)
        if self._in_place():  # shielded(eager=True), without its coroutine when done at once
            done, rest = flight.begin(at.flight, "intent", work)
            if not done:
                await rest
        else:
            await flight.shielded(at.flight, "intent", work)
        at.idempotency_key = idem_key

    async def execute(
        self, at: Attempt, request: ExecutionRequest, first: ExecutionOutcome | None = None
    ) -> ExecutionOutcome:
        """Run the request on the tool's executor; read-only idempotent tools are retried.
        ``first``: the executor's answer to the first attempt, already awaited (by
        :meth:`dispatch`, which comes here only when that answer is not a plain success)."""
        state, contract = self.state, at.bound()
        kind = state.bindings.get(contract.id, "python")
        executor = state.executors.get(kind)
        if executor is None:
            return ExecutionOutcome(
                status="failed",
                error=InternalFailure(
                    f"no executor of kind {kind!r} is configured", reason="EXECUTOR_MISSING"
                ),
                dispatched=False,
            )
        retry = contract.read_only and bool(contract.annotations.idempotent)
        attempts = state.settings.read_retry_attempts if retry else 1
        backoff = state.settings.read_retry_backoff_s
        outcome: ExecutionOutcome | None = None
        for attempt in range(1, attempts + 1):
            if first is not None:
                outcome, first = first, None
            else:
                outcome = await executor.execute(request)
            transient = (
                outcome.status == "unknown"
                or (outcome.error is not None and outcome.error.code.value == "transient_external")
            ) and not (outcome.error is not None and outcome.error.details.get("thread_held"))
            if outcome.status == "succeeded" or not transient or attempt == attempts:
                if outcome.attempts != attempt:
                    outcome = replace(outcome, attempts=attempt)
                return outcome
            await state.store.append(
                at.ctx.run_id,
                [
                    NewEvent(
                        type="tool_progress",
                        payload={
                            "stage": "retrying",
                            "context_id": at.ctx.context_id,
                            "call_id": at.call_id,
                            "attempt": attempt + 1,
                            "reason": outcome.reason,
                        },
                    )
                ],
            )
            await asyncio.sleep(backoff * (2 ** (attempt - 1)))
        assert outcome is not None
        return outcome

    async def dispatch(self, at: Attempt) -> Envelope:
        """Phases 8 to 10: dispatch, acceptance, outcome (after the intent is committed)."""
        state, ctx, contract, arguments = self.state, at.ctx, at.bound(), at.arguments
        assert at.idempotency_key is not None
        files: call_artifacts.RunFiles | None = None
        service = state.artifacts
        if (
            contract.artifacts is not None
            and not contract.delegates_execution  # its calls register their own files
            and service is not None
            and state.bindings.get(contract.id, "python") == "python"
        ):
            inputs = await call_artifacts.check_inputs(
                service, ctx.run_id, contract, arguments, verify=False
            )
            files = call_artifacts.RunFiles(
                service,
                ctx.run_id,
                contract,
                inputs,
                state.redactor_of(at).contains_secret,
            )
        channel = ProgressChannel(
            state.store, ctx.run_id, ctx.context_id, at.call_id, state.redactor_of(at)
        )
        tool_ctx = _make_tool_context(
            call_id=at.call_id,
            idempotency_key=at.idempotency_key,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool_id=contract.id,
            tenant=ctx.tenant,
            principal=at.principal.name,
            agent=ctx.agent,
            task_id=at.task_id,
            trace_id=at.trace["trace_id"],
            span_id=at.trace["span_id"],
            artifacts=files,
            cancelled=CancelFlag(),
            progress_sink=channel.send,
        )
        lingering: list[Awaitable[None]] = []
        request = _make_request(
            contract=contract,
            arguments=arguments,
            context=tool_ctx,
            deadline_s=contract.timeout_s,
            linger=lingering.append,
            unstarted=at.flight.unstarted,
        )
        # A delegating tool takes no write lock (each write it makes takes it) and its span
        # is the parent of every call made inside it; any other tool runs inside no span
        # (usually already so: then there is nothing to set).
        delegates = contract.delegates_execution
        span = at.trace["span_id"] if delegates else None
        # (CURRENT_SPAN set and reset directly: no context manager when it is already right)
        token = CURRENT_SPAN.set(span) if CURRENT_SPAN.get() != span else None
        executor = state.executors.get(state.bindings.get(contract.id, "python"))
        try:
            lock = None if contract.read_only or delegates else state.store.run_lock(ctx.run_id)
            if lock is not None:
                await lock.__aenter__()  # cancelled while waiting for it: nothing ran
            at.flight.phase = flight.DISPATCH
            try:
                # the first attempt awaited here (no coroutine of ours around the executor's);
                # execute() takes over for anything but a success of one attempt: retries,
                # the attempts it says, a missing executor
                outcome = (
                    await executor.execute(request)
                    if executor is not None
                    else await self.execute(at, request)
                )
                if executor is not None and (
                    outcome.status != "succeeded" or outcome.attempts != 1
                ):
                    outcome = await self.execute(at, request, first=outcome)
            finally:
                if lock is not None:
                    await self._release(lock, lingering)
        finally:
            if token is not None:
                CURRENT_SPAN.reset(token)
            # the messages (and the held-back rest) are recorded before the outcome
            drain = channel.close()
            if drain is not None:
                await asyncio.shield(drain)
        faults.point("after_result", contract.id)
        settled = self.accept(contract, arguments, outcome, at.warnings, state.redactor_of(at))
        registered: list[ArtifactRecord] = []
        artifact_ids: list[str] = []
        if files is not None and service is not None:
            written = await call_artifacts.seal(files)
            if settled.status is CallStatus.SUCCEEDED and written:
                producer = Producer(task_id=at.task_id, tool_id=contract.id, call_id=at.call_id)
                try:
                    registered, artifact_ids = await call_artifacts.records_for(
                        service, ctx.run_id, written, producer
                    )
                except Failure as exc:
                    settled = Settled(CallStatus.FAILED, None, exc, 0, settled.attempts)
            if settled.status is not CallStatus.SUCCEEDED and written:
                await service.rollback(ctx.run_id, [w.stored for w in written])
        at.flight.phase = flight.FINISH
        recording = self.finish(at, settled, registered, artifact_ids)
        # (in place unless an audit sink may hold an anyio scope or task group across its
        # first wait: shielded(eager=True), without its coroutine when done at once)
        if state.audit is None and self._in_place():
            done, result = flight.begin(at.flight, "outcome", recording)
            envelope: Envelope = result if done else await result
        else:
            envelope = await flight.shielded(at.flight, "outcome", recording)
        if envelope.status is not CallStatus.SUCCEEDED and artifact_ids and service is not None:
            # The outcome could not be recorded: nothing was registered; remove the files.
            await service.rollback(ctx.run_id, [r.stored() for r in registered])
        if not at.flight.waited:
            # Appends done in place never gave the loop a turn: yield once, as tasks did, so
            # back-to-back calls of one caller neither hold the loop nor keep other callers
            # from taking off (the store commits inline only while one call is in flight).
            await _yield_once()  # what asyncio.sleep(0) does, without its two calls
        return envelope

    async def _release(self, lock: AbstractAsyncContextManager[None], lingering: list[Any]) -> None:
        """Release the run's write lock now — or, when the executor says the tool's thread
        outlives its answer (a timed-out or cancelled sync tool), once that thread really
        ends, from a task of its own so the answer is not held back."""
        if not lingering:
            await lock.__aexit__(None, None, None)
            return

        async def release() -> None:
            try:
                await asyncio.gather(*lingering, return_exceptions=True)
            finally:
                await lock.__aexit__(None, None, None)

        task = asyncio.get_running_loop().create_task(release())
        self._lingering.add(task)  # a strong reference while it waits
        task.add_done_callback(self._lingering.discard)

    def accept(
        self,
        contract: ToolContract,
        arguments: Mapping[str, Any],
        outcome: ExecutionOutcome,
        warnings: list[str],
        redactor: Redactor | None = None,
    ) -> Settled:
        """Phase 9: check the result against the contract, redact it, clamp its size
        (``redactor``: the call's, when the caller has it; else made from the arguments)."""
        if outcome.status == "unknown":
            return Settled(CallStatus.UNKNOWN, None, outcome.error, 0, outcome.attempts)
        if outcome.status == "failed":
            return Settled(CallStatus.FAILED, None, outcome.error, 0, outcome.attempts)
        try:
            check_result(outcome.result, self.state.result_schema(contract))
            # A tool may echo a secret argument under an innocent key: scrub those values too.
            if redactor is None:
                redactor = self.state.call_redactor(contract, arguments)
            redacted = redactor.redact(outcome.result)
            accepted = clamp(redacted, contract)
        except Failure as exc:
            # The tool ran and answered: an unacceptable result leaves a write's effect done
            # or in doubt, so only a read tool may say failed (docs/executors.md).
            status = CallStatus.FAILED if contract.read_only else CallStatus.UNKNOWN
            return Settled(status, None, exc, 0, outcome.attempts)
        if accepted.warnings:
            warnings.extend(accepted.warnings)
        # (the tuple itself: what the named tuple's generated __new__ makes, without its call)
        return _new_tuple(
            Settled,
            (CallStatus.SUCCEEDED, accepted.data, None, accepted.output_bytes, outcome.attempts),
        )

    async def finish(
        self,
        at: Attempt,
        settled: Settled,
        registered: Sequence[ArtifactRecord] = (),
        artifact_ids: Sequence[str] = (),
    ) -> Envelope:
        """Phase 10: record the outcome (receipt, artifacts, audit) and answer with it."""
        ctx, contract, answers = at.ctx, at.bound(), self.answers
        status, data, attempts = settled.status, settled.data, settled.attempts
        duration_ms = (time.perf_counter() - at.started) * 1000
        err = answers.safe_error(settled.error)
        value = _STATUS_VALUES[status]  # (an enum's .value runs Python code)
        receipt = {
            "status": value,
            "data": data if contract.store_result else None,
            "error": err,
            "warnings": list(at.warnings),
            "artifact_ids": list(artifact_ids),
            "output_bytes": settled.output_bytes,
            "attempts": attempts,
            "duration_ms": round(duration_ms, 3),
        }
        if data is not None and not contract.store_result:
            # keyed, so it proves which result was returned without keeping it (a stored
            # result is its own evidence: no second canonical encoding on the common path)
            receipt["result_fingerprint"] = self.state.fingerprinter.fingerprint(data)
        stage = _STAGES.get(value, "unknown")
        audited = answers.audit_entry(
            at,
            value,
            duration_ms,
            reason=err["reason"] if err else None,
            code=err["code"] if err else None,
            versioned=True,
        )
        entries = [
            *map(registration_event, registered),
            _make_event(
                type="tool_progress",
                payload={
                    "stage": stage,
                    "context_id": ctx.context_id,
                    "call_id": at.call_id,
                    "receipt": receipt,
                },
                at=None,
            ),
            audited,
        ]
        try:
            await self.state.store.append(ctx.run_id, entries)
        except InvalidInput as exc:
            if exc.reason != "CALL_TRANSITION_INVALID":
                raise
            # Another process made the call unknown while we waited (restart reconciliation):
            # keep the answer as evidence, never as the outcome.
            return await record_late_result(self.state, answers, at, receipt)
        except StoreError:
            # The effect may have happened; the outcome could not be recorded. Say so: on
            # restart the call is reconciled to unknown, never dispatched again.
            status = CallStatus.UNKNOWN
            artifact_ids = ()
            err = error_dict(
                InternalFailure("the outcome could not be recorded", reason="OUTCOME_NOT_RECORDED")
            )
            audited = answers.audit_entry(
                at,
                status.value,
                duration_ms,
                reason=err["reason"],
                code=err["code"],
                versioned=True,
            )
        if self.state.audit is not None:  # (no sink: no coroutine)
            await answers.sink(ctx, audited)
        return _make_envelope(
            call_id=at.call_id,
            status=status,
            data=data,
            artifact_ids=tuple(artifact_ids),
            warnings=tuple(at.warnings),
            error=err,
            approval=None,
            metrics=_make_metrics(
                duration_ms=duration_ms,
                cached=False,
                attempts=attempts,
                output_bytes=settled.output_bytes,
            ),
            trace=at.trace,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool=contract.id,
        )

    async def coalesce(self, at: Attempt, row: CallRow) -> Envelope:
        """Wait for an in-flight duplicate to finish and answer with its outcome."""
        state, ctx, contract = self.state, at.ctx, at.bound()
        deadline = time.monotonic() + contract.timeout_s + state.settings.coalesce_grace_s
        current: CallRow | None = row
        key = (ctx.context_id, row.call_id)
        running = state.flying.get(key, 0) - (1 if at.flight.key == key else 0)  # not this one
        if row.owner == state.owner and running <= 0:
            # ours, yet no call of this process runs it: its outcome could not be recorded
            await settle_stranded(state, row)
            current = await state.call_row(ctx, row.call_id)
        while current is not None and current.state not in TERMINAL_STATES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            head = await state.store.head(ctx.run_id)
            await state.store.wait_for_events(
                ctx.run_id, after=head.seq if head else 0, timeout=min(remaining, 0.5)
            )
            current = await state.call_row(ctx, row.call_id)
        if current is not None and current.state in TERMINAL_STATES:
            return await self.answers.cached(current, at)
        return Envelope(
            call_id=row.call_id,
            status=CallStatus.DISPATCHING,
            warnings=("IN_FLIGHT: the same call is still running; ask again later",),
            metrics=Metrics(duration_ms=(time.perf_counter() - at.started) * 1000, cached=True),
            trace=at.trace,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool=contract.id,
        )

    async def ungoverned(
        self,
        at: Attempt,
        contract: ToolContract | None,
        arguments: str | bytes | Mapping[str, Any],
    ) -> Envelope:
        """Mode ``off``: run the tool directly, record nothing."""
        state, ctx, answers = self.state, at.ctx, self.answers
        if contract is None:
            return answers.answer(
                at,
                CallStatus.DENIED,
                PermissionDenied(
                    "this context does not offer that tool", reason="TOOL_NOT_DISCLOSED"
                ),
            )
        try:
            accepted = (
                state.intake(contract).accept(arguments)
                if isinstance(arguments, str | bytes)
                else state.intake(contract).accept_value(arguments)
            )
        except InvalidInput as exc:
            rejected = state.input_refusal(contract, arguments, exc)
            return answers.answer(at, CallStatus.REJECTED, rejected)
        tool_ctx = ToolContext(
            call_id=at.call_id,
            idempotency_key=state.idempotency_key(ctx, at.call_id, accepted.fingerprint),
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool_id=contract.id,
            tenant=ctx.tenant,
            principal=at.principal.name,
            task_id=at.task_id,
        )
        executor = state.executors.get(state.bindings.get(contract.id, "python"))
        if executor is None:
            return answers.answer(
                at,
                CallStatus.FAILED,
                InternalFailure("no executor", reason="EXECUTOR_MISSING"),
            )
        outcome = await executor.execute(
            ExecutionRequest(
                contract=contract,
                arguments=accepted.arguments,
                context=tool_ctx,
                deadline_s=contract.timeout_s,
            )
        )
        settled = self.accept(contract, accepted.arguments, outcome, [])
        return Envelope(
            call_id=at.call_id,
            status=settled.status,
            data=settled.data,
            error=answers.safe_error(settled.error),
            metrics=Metrics(
                duration_ms=(time.perf_counter() - at.started) * 1000,
                attempts=outcome.attempts,
                output_bytes=settled.output_bytes,
            ),
            trace=at.trace,
            tool=contract.id,
        )
