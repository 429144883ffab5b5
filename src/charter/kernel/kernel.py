"""The kernel: the one governed call path every entry point uses (DESIGN §3).

:meth:`Kernel.call` reads top to bottom as the phases::

    1 attribution → 2 disclosure & authorization → 3 budgets → 4 validation
    → 5 idempotency reservation → 6 approval gate → 7 intent → 8 dispatch
    → 9 acceptance → 10 outcome

The order of the phases is all here; the longer ones are methods of the parts the kernel
holds (the :class:`ApprovalGate` for phase 6, the :class:`Dispatcher` for 7 to 10), each
handed the one :class:`~charter.kernel.core.Attempt` the phases fill in as they pass.

Durable decisions are events in the context's run, appended through the store; the store's
transaction (projection handlers in :mod:`charter.ledger.calls_projection`) is what makes the
reservation of a call id and the budgets exact, whether the duplicates come from coroutines in
one process or from several processes sharing the store. Nothing here imports the server, MCP,
provider or adapter layers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, overload

import anyio

from charter import telemetry
from charter.artifacts.service import ArtifactService
from charter.contracts.canonical import Fingerprinter
from charter.contracts.delegation import CURRENT_SPAN
from charter.contracts.model import ToolContract
from charter.contracts.text import MAX_OBJECTIVE, bounded, shown
from charter.errors import (
    Failure,
    InternalFailure,
    InvalidInput,
    PermissionDenied,
    ResourceLimit,
    StoreConflict,
    StoreError,
    TransientExternal,
)
from charter.kernel import builds, delegation, faults, flight
from charter.kernel.admission import admit, call_id_refusal
from charter.kernel.answers import Answers
from charter.kernel.approvals import ApprovalGate
from charter.kernel.artifacts import check_inputs
from charter.kernel.audit import AuditRecord, AuditSink
from charter.kernel.authorize import Hook, authorize, make_input
from charter.kernel.contexts import (
    Attachment,
    ContextProvider,
    OfferedTool,
    ResolvedContext,
    check_attachment,
    estimate_tokens,
    schema_digest,
)
from charter.kernel.core import _RUN_ENDED, Arrival, KernelState, _parse_at, make_arrival
from charter.kernel.dispatch import Dispatcher
from charter.kernel.endcall import cancelled, closed_context, interrupted
from charter.kernel.endings import RunEndings
from charter.kernel.envelope import TERMINAL_STATES, CallStatus, Envelope
from charter.kernel.executor_port import Executor
from charter.kernel.leases import OwnerLease
from charter.kernel.limits import ADMITTED, Limiter
from charter.kernel.operators import Operators
from charter.kernel.policy_order import authorization
from charter.kernel.principals import Principal
from charter.kernel.readiness_port import ReadinessSource
from charter.kernel.redaction import Redactor
from charter.kernel.retention import expire_run_metadata
from charter.kernel.sessions import Sessions
from charter.kernel.settings import KernelSettings, Mode
from charter.kernel.store import KernelStore
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import NewEvent, format_at
from charter.ledger.views import ApprovalRow, CallRow, ContextRow, RunRow
from charter.project.build import Build


def _requested(approval: ApprovalRow) -> tuple[int, str] | None:
    """When the approval being consumed was requested, for its wait span."""
    at = approval.requested_at or approval.row.get("created_at")
    if not isinstance(at, str) or not at:
        return None
    try:
        return int(_parse_at(at).timestamp() * 1e9), approval.approval_id
    except ValueError:
        return None


ADHOC_SLUG = "adhoc"
_log = logging.getLogger("charter.kernel")
# Reservation, approval bookkeeping and intent are retried when a concurrent caller's append
# got in first (a duplicate's reservation, another approval changing the run's status).
_RESERVE_ATTEMPTS = 40
time_ns = time.time_ns
_MODE_VALUES = {mode: mode.value for mode in Mode}
T = TypeVar("T")


class _Shared(Generic[T]):
    """A kernel attribute that lives in its :class:`KernelState` (read and set there)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Shared[T]: ...
    @overload
    def __get__(self, obj: Kernel, objtype: type | None = None) -> T: ...
    def __get__(self, obj: Kernel | None, objtype: type | None = None) -> T | _Shared[T]:
        if obj is None:
            return self
        value: T = getattr(obj.state, self.name)
        return value

    def __set__(self, obj: Kernel, value: T) -> None:
        setattr(obj.state, self.name, value)


class Kernel:
    """The governed call path over one Build, one store and one deployment.

    The kernel composes its parts, each built here over the one shared
    :class:`~charter.kernel.core.KernelState`: :class:`Answers` (envelopes and audit records),
    the :class:`ApprovalGate` (phase 6 and operators' decisions), the :class:`Dispatcher`
    (phases 7 to 10) and :class:`Operators` (reconcile, resolve, read calls).
    """

    # Set by the runtime: tools that are not ready are omitted (optional) or block resolution
    # (required). ``None``: every bound tool counts as ready.
    readiness: ReadinessSource | None = None
    # Set by the runtime from the deployment's rate and concurrency limits (None: unlimited).
    limiter: Limiter | None = None

    build = _Shared[Build]()
    store = _Shared[KernelStore]()
    fingerprinter = _Shared[Fingerprinter]()
    executors = _Shared[dict[str, Executor]]()
    bindings = _Shared[dict[str, str]]()
    settings = _Shared[KernelSettings]()
    redactor = _Shared[Redactor]()
    audit = _Shared[AuditSink | None]()
    providers = _Shared[dict[str, ContextProvider]]()
    ownership_hooks = _Shared[tuple[Hook, ...]]()
    clock = _Shared[Clock]()
    # Set by the runtime: the run's artifact store and the ledger-backed registry. ``None``:
    # tools that declare artifacts get no writer (``ctx.artifacts`` is None).
    artifacts = _Shared[ArtifactService | None]()

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
        self.state = KernelState(
            build=build,
            store=store,
            fingerprinter=fingerprinter,
            executors=executors,
            bindings=bindings,
            settings=settings,
            redactor=redactor,
            audit=audit,
            providers=providers,
            ownership_hooks=ownership_hooks,
            clock=clock,
            hex_source=hex_source,
        )
        self.answers = Answers(self.state)
        self.approvals = ApprovalGate(self.state, self.answers)
        self.dispatcher = Dispatcher(self.state, self.answers)
        self.operators = Operators(self.state)
        self.sessions = Sessions(self.state)

    def _now(self) -> datetime:
        return self.state.now()

    # -----------------------------------------------------------------------------------
    # reads and operators' actions (held by the parts; named here for the callers)

    async def get_context(
        self, context_id: str, tenant: str | None = None
    ) -> ResolvedContext | None:
        return await self.state.context(context_id, tenant)

    async def find_approval(self, approval_id: str, tenant: str) -> ApprovalRow | None:
        return await self.approvals.find_approval(approval_id, tenant)

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
        """Approve or reject a pending approval (see :meth:`ApprovalGate.decide`)."""
        return await self.approvals.decide(
            approval_id,
            approve=approve,
            principal=principal,
            token=token,
            tenant=tenant,
            reason=reason,
            token_matches=token_matches,
        )

    async def list_approvals(
        self, *, tenant: str, status: str | None = None, limit: int = 100
    ) -> list[ApprovalRow]:
        return await self.approvals.list_approvals(tenant=tenant, status=status, limit=limit)

    async def end_run(
        self, run_id: str, status: str, reason: str, operator: Principal
    ) -> dict[str, Any]:
        """An operator cancels or fails a run (:mod:`charter.kernel.endings`)."""
        endings = RunEndings.of(self.state)
        return await endings.end_run(run_id, status, reason=reason, operator=operator)

    async def end_task(
        self, run_id: str, task_id: str, status: str, reason: str, operator: Principal
    ) -> dict[str, Any]:
        """An operator cancels, fails or skips a task (:mod:`charter.kernel.endings`)."""
        endings = RunEndings.of(self.state)
        return await endings.end_task(run_id, task_id, status, reason=reason, operator=operator)

    async def maintain(self) -> dict[str, int]:
        """One round of upkeep (``charter serve`` runs it periodically): calls left
        ``dispatching`` by a process whose lease lapsed become ``unknown``, approvals past
        their lifetime are recorded ``expired``, idle session runs are ended, and ended runs
        past the metadata retention lose their fingerprints (kernel/retention.py). Safe from
        any number of processes at once. Returns how many of each this round changed."""
        return {
            "reconciled": len(await self.reconcile()),
            "expired_approvals": len(await self.expire_approvals()),
            "idle_runs_closed": len(await self.close_idle_runs()),
            "run_metadata_expired": len(await expire_run_metadata(self.state)),
        }

    async def maintain_on_open(self, *, activate: bool = True) -> None:
        """What a runtime does when it opens: make its Build the store's current one (unless
        not ``activate``: a one-shot command), reconcile, and end idle session runs."""
        if activate:
            await builds.activate(self.state)
        await self.reconcile()
        await self.close_idle_runs()
        await expire_run_metadata(self.state)

    async def close_idle_runs(self) -> list[RunRow]:
        """End session runs idle past ``session_idle_s`` (see :mod:`charter.kernel.sessions`)."""
        return await self.sessions.close_idle()

    async def expire_approvals(self, *, tenant: str | None = None) -> list[ApprovalRow]:
        """Record approvals past their lifetime ``expired`` (ApprovalGate.expire_approvals)."""
        return await self.approvals.expire_approvals(tenant=tenant)

    @property
    def lease(self) -> OwnerLease:
        """This process's owner lease (:mod:`charter.kernel.leases`)."""
        return self.state.lease

    async def reconcile(self) -> list[CallRow]:
        """Calls left ``dispatching`` by a process whose lease lapsed (any host), or whose
        pid is dead on this host, become ``unknown``."""
        return await self.operators.reconcile()

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
        return await self.operators.resolve_call(
            context_id, call_id, outcome=outcome, reason=reason, operator=operator
        )

    async def get_call(self, context_id: str | None, call_id: str, tenant: str) -> CallRow | None:
        return await self.operators.get_call(context_id, call_id, tenant)

    async def context_row(self, run_id: str, context_id: str) -> ContextRow | None:
        return await self.operators.context_row(run_id, context_id)

    # -----------------------------------------------------------------------------------
    # contexts

    async def resolve_context(
        self,
        principal: Principal,
        profile: str,
        *,
        agent: str | None = None,
        objective: str | None = None,
        attachments: Sequence[tuple[str, str]] = (),
        run_id: str | None = None,
        session_id: str | None = None,
        workflow_slug: str = ADHOC_SLUG,
        session: bool = False,
    ) -> ResolvedContext:
        """Resolve and record a context; an ad-hoc run is created when ``run_id`` is None.

        With ``session`` (chat conversations, MCP sessions), ``run_id`` is the session's
        current run: when it has ended, or is past its budgets and the deployment renews
        session budgets, the old run is ended and the context opens a fresh run of the same
        session (:mod:`charter.kernel.sessions`).
        """
        state = self.state
        if profile not in state.build.profiles:
            raise InvalidInput(f"unknown profile {shown(profile)}", reason="PROFILE_UNKNOWN")
        # A client's text, kept in the ledger and the context row: bounded, no known secret,
        # no value a redaction pattern matches (docs/privacy.md)
        bounded(objective, field="objective", limit=MAX_OBJECTIVE, reason="OBJECTIVE_TOO_LONG")
        if objective:
            objective = state.redactor.redact_text(objective)
        state.redactor.refuse_in_id(session_id, "session_id")
        for index, attachment in enumerate(attachments):  # kept as ids (kind:ref)
            check_attachment(attachment, index, state.redactor)
        agent_tools: frozenset[str] | None = None
        if agent is not None:
            if agent not in state.build.agents:
                raise InvalidInput(f"unknown agent {shown(agent)}", reason="AGENT_UNKNOWN")
            agent_tools = frozenset(state.build.agents[agent].tools)
        contracts = [
            c
            for c in state.build.profile_tools(profile)
            if self._visible(principal, c, agent, agent_tools)
        ]
        if self.readiness is not None and contracts:
            report = await self.readiness.report()
            ready = []
            for c in contracts:
                ready_state = report.get(c.id)
                if ready_state is None or ready_state.ready:
                    ready.append(c)
                elif ready_state.required:
                    await self._audit_not_ready(principal, c, ready_state.reason)
                    raise TransientExternal(
                        f"required tool {c.id} is not ready: "
                        f"{ready_state.reason} ({ready_state.message})",
                        reason="TOOL_NOT_READY",
                        details={"tool": c.id, "readiness_reason": ready_state.reason},
                        retryable=ready_state.reason == "EXECUTOR_UNREACHABLE",
                    )
            contracts = ready
        resolved: list[Attachment] = []
        unresolved: list[str] = []
        allowed_providers = (
            set(state.build.agents[agent].context_providers) if agent is not None else None
        )
        for kind, ref in attachments:
            provider = state.providers.get(kind)
            if provider is None or (
                allowed_providers is not None and kind not in allowed_providers
            ):
                unresolved.append(f"{kind}:{ref}")
                continue
            found = await provider.resolve(principal, ref)
            if found is None:
                unresolved.append(f"{kind}:{ref}")
            else:
                resolved.append(found)
        tokens = estimate_tokens(contracts, resolved)
        if tokens > state.settings.token_budget:
            raise ResourceLimit(
                f"the context needs about {tokens} tokens; the budget is "
                f"{state.settings.token_budget}",
                reason="CONTEXT_BUDGET_EXCEEDED",
                details={"estimate": tokens, "budget": state.settings.token_budget},
            )
        now = state.now()
        entries: list[NewEvent] = []
        if run_id is not None and session:
            await self._check_run_tenant(run_id, principal)
            current = await state.store.read_view(RunRow, run_id)
            if current is not None and await self.sessions.needs_renewal(current):
                if current.status == "running":
                    await self.sessions.end(current, "BUDGET_RENEWED")
                run_id = None
        if run_id is None:
            run_id = state.new_id(workflow_slug)
            entries += [
                NewEvent(
                    type="run_created",
                    payload={
                        "session_id": session_id or run_id,
                        "workflow_slug": workflow_slug,
                        "tenant": principal.tenant,
                        "created_by": principal.name,
                    },
                ),
                NewEvent(type="run_status_changed", payload={"status": "planning"}),
                NewEvent(type="run_status_changed", payload={"status": "running"}),
            ]
        else:
            await self._check_run_tenant(run_id, principal, open_only=True)
        context = ResolvedContext(
            context_id=state.new_id("ctx"),
            run_id=run_id,
            build_digest=state.build.digest,
            principal=principal.name,
            tenant=principal.tenant,
            kind=principal.kind.value,
            profile=profile,
            agent=agent,
            objective=objective,
            tools=tuple(
                OfferedTool(
                    id=c.id,
                    name=c.name,
                    version=c.version,
                    digest=c.digest,
                    effect=c.effect.value,
                    call_limit=c.call_limit,
                )
                for c in contracts
            ),
            schema_digest=schema_digest(contracts),
            token_estimate=tokens,
            token_budget=state.settings.token_budget,
            attachments=tuple(resolved),
            unresolved=tuple(unresolved),
            created_at=format_at(now),
            expires_at=format_at(now + timedelta(seconds=state.settings.context_lifetime_s)),
        )
        entries.append(NewEvent(type="context_resolved", payload=context.payload()))
        if state.settings.mode is not Mode.OFF:
            await state.store.append(run_id, entries)
        state.contexts[context.context_id] = context
        return context

    async def _audit_not_ready(
        self, principal: Principal, contract: ToolContract, reason: str | None
    ) -> None:
        """A context refused because a required tool is not ready: the audit file says so."""
        audit = self.state.audit
        if audit is None:
            return
        await audit.record(
            AuditRecord(
                at=self._now(),
                actor=principal.name,
                tenant=principal.tenant,
                tool=contract.id,
                tool_version=contract.version,
                call_id=None,
                context_id=None,
                run_id=None,
                outcome="not_ready",
                code="transient_external",
                reason="TOOL_NOT_READY",
                mode=self.state.settings.mode.value,
                details={"readiness_reason": reason},
            )
        )

    def _visible(
        self,
        principal: Principal,
        contract: ToolContract,
        agent: str | None,
        agent_tools: frozenset[str] | None,
    ) -> bool:
        """A tool is offered only if this principal could call it: listing = callable set."""
        if agent_tools is not None and contract.id not in agent_tools:
            return False
        if contract.agent_scopes and (agent is None or agent not in contract.agent_scopes):
            return False
        return all(principal.has(p) for p in contract.permissions)

    async def _check_run_tenant(
        self, run_id: str, principal: Principal, *, open_only: bool = False
    ) -> None:
        """Another tenant's run (or none) answers as missing; ``open_only``: ended → RUN_ENDED."""
        run = await self.state.store.read_view(RunRow, run_id)
        if run is None or run.tenant != principal.tenant:
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND")
        if open_only and run.status in _RUN_ENDED:
            raise PermissionDenied("the run has ended; nothing more runs in it", reason="RUN_ENDED")

    # -----------------------------------------------------------------------------------
    # the call path

    async def call(
        self,
        context_id: str,
        tool: str,
        call_id: str,
        arguments: str | bytes | Mapping[str, Any],
        *,
        principal: Principal,
        approval_id: str | None = None,
        task_id: str | None = None,
        trace_id: str | None = None,
        parent_span_id: str | None = None,
    ) -> Envelope:
        """Run one governed call and answer with its v2 envelope. Never raises.

        ``parent_span_id`` names the delegating call this one is made in; by default the one
        this code runs inside (:mod:`charter.kernel.delegation`).

        A failure before the intent was committed means nothing was dispatched: the answer is
        ``failed`` (a store failure, or ``internal`` / ``INTERNAL_ERROR`` for anything that is
        not a :class:`Failure`), audited, safe to retry with the same call id. After the
        intent the call is recorded ``failed`` (executor never asked) or ``unknown``. A
        cancelled caller gets its ``CancelledError`` back once the call is recorded
        ``cancelled`` or ``unknown`` (:mod:`charter.kernel.flight`).
        """
        arrival = make_arrival(
            call_id=call_id if isinstance(call_id, str) else "",
            tool=tool,
            principal=principal,
            task_id=task_id,
            presented=approval_id,
            started=time.perf_counter(),
            trace=self.state.trace(trace_id),
            parent_span_id=parent_span_id if parent_span_id is not None else CURRENT_SPAN.get(),
        )
        with telemetry.tool_span(tool, arrival.call_id, context_id=context_id) as span:
            admission = ADMITTED
            try:
                # (no limiter admits every call: no coroutine to say so)
                admitted = (
                    ADMITTED
                    if self.limiter is None
                    else await admit(self.state, self.answers, self.limiter, arrival, context_id)
                )
                if isinstance(admitted, Envelope):
                    envelope = admitted
                else:
                    admission = admitted
                    # ``async with lease.held()``, without its two coroutines: take() holds
                    # the lease (raising, it holds nothing), drop() ends the hold
                    lease = self.state.lease
                    renewal = lease.take()
                    try:
                        if renewal is not None:  # due: renewed before the intent
                            await renewal
                        envelope = await self._call(arrival, context_id, arguments)
                    finally:
                        lease.drop()
            except Failure as exc:
                envelope = await interrupted(self.state, self.answers, arrival, exc)
            except asyncio.CancelledError as stop:
                # Record how far the call got (shielded), then go on with the cancellation.
                await cancelled(self.state, self.answers, arrival, stop)
                raise
            except Exception as exc:
                # A hook, the redactor, an executor or a store raised what is not a Failure.
                _log.warning("call %r raised %s; answered internal", call_id, type(exc).__name__)
                _log.debug("the call path raised", exc_info=True)
                error = InternalFailure(
                    f"the call path raised {type(exc).__name__}",
                    reason="INTERNAL_ERROR",
                    details={"exception": type(exc).__name__},
                )
                envelope = await interrupted(self.state, self.answers, arrival, error)
            finally:
                flight.land(self.state.flying, arrival.flight)
                if admission is not ADMITTED:
                    with anyio.CancelScope(shield=True):  # a cancelled call frees its slots
                        await admission.release()
            timeline = arrival.timeline
            if timeline.waited is not None:
                requested, approval_id = timeline.waited
                telemetry.record_span(
                    "charter.approval_wait",
                    requested,
                    timeline.marks[-1][1],
                    **{"charter.approval_id": approval_id},
                )
            telemetry.phase_timings(timeline.marks, time.time_ns(), span)  # the current span
            telemetry.finish_tool_span(span, envelope, tenant=principal.tenant)
            return envelope

    async def _call(
        self,
        arrival: Arrival,
        context_id: str,
        arguments: str | bytes | Mapping[str, Any],
    ) -> Envelope:
        state, answers = self.state, self.answers
        settings = state.settings
        # 1. attribution
        principal = arrival.principal
        ctx = state.contexts.get(context_id) or await state.context(context_id, principal.tenant)
        if ctx is None or ctx.tenant != principal.tenant:
            denied = PermissionDenied("no such context", reason="CONTEXT_NOT_FOUND")
            return answers.answer(arrival, CallStatus.DENIED, denied, tool=arrival.tool)
        at = arrival.attempt(ctx)
        mark = at.timeline.marks.append  # Timeline.mark, without a call of ours per phase
        if ctx.metadata_expired_at is not None:  # retention: no receipt, no dedup, no replay
            gone = PermissionDenied("the run's metadata has expired", reason="RUN_METADATA_EXPIRED")
            return await answers.refuse(at, gone, CallStatus.DENIED)
        offered = ctx.offered(at.tool)
        bound = state.build.tools.get(offered.id) if offered is not None else None
        contract = bound.contract if bound is not None else None
        at.contract = contract  # offered: from here on, refusals and audit records name it
        invalid = call_id_refusal(at, state.redactor)
        if invalid is not None:
            return await answers.refuse(at, invalid, CallStatus.REJECTED)
        mode = settings.modes.resolve(
            settings.mode,
            tool=offered.id if offered is not None else None,
            agent=ctx.agent,
            profile=ctx.profile,
        )
        at.mode = _MODE_VALUES[mode]  # (an enum's .value runs Python code)
        if mode is Mode.OFF:
            return await self.dispatcher.ungoverned(at, contract, arguments)
        # A context answers only under the Build it was resolved for; an old one (or an
        # expired one) can still hand back a finished call's receipt, nothing else.
        # Only a runtime of the store's current Build retires what such a context holds.
        if ctx.build_digest != state.build.digest:
            return await builds.other_build(state, answers, self.approvals, at, arguments)
        if state.now() >= state.expiry(ctx):
            expired = PermissionDenied(
                "the context has expired; resolve a new one", reason="CONTEXT_EXPIRED"
            )
            return await closed_context(state, answers, at, arguments, expired)
        if offered is not None and contract is None:
            missing = PermissionDenied("the tool is not in this Build", reason="TOOL_NOT_IN_BUILD")
            return await answers.refuse(at, missing, CallStatus.DENIED)
        observe = mode is Mode.OBSERVE
        # 2. disclosure (the part of authorization that needs no arguments)
        mark(("authorization", time_ns()))
        inp = make_input(
            principal=principal,
            context=ctx,
            tool=at.tool,
            contract=contract,
            agent_tools=state.agent_tools(ctx.agent),
            enablement=settings.enablement,
            max_danger=settings.max_danger,
        )
        denial = authorize(inp, before_validation=True)
        if denial is not None and (not observe or contract is None):
            return await answers.deny(at, denial)
        if denial is not None:
            at.would.append({"phase": "authorization", "reason": denial.reason})
        assert contract is not None
        # 4. validation (strict parse, then the contract's schema), then the rest of phase 2
        mark(("validation", time_ns()))
        try:
            intake = state.intake(contract)
            accepted = (
                intake.accept(arguments)
                if isinstance(arguments, str | bytes)
                else intake.accept_value(arguments)
            )
        except InvalidInput as exc:
            rejected = state.input_refusal(contract, arguments, exc)
            return await answers.refuse(at, rejected, CallStatus.REJECTED)
        at.arguments, at.fingerprint = accepted.arguments, accepted.fingerprint
        invalid = call_id_refusal(at, state.redactor_of(at))  # its own secret arguments
        if invalid is not None:
            return await answers.refuse(at, invalid, CallStatus.REJECTED)
        # tenant, RBAC, ownership, danger, enablement, agent scope, then the task rules
        found = await authorization(state, at, inp, disclosed=denial is None)
        if found is not None and not observe:
            return await answers.deny(at, found[1])
        if found is not None:
            at.would.append({"phase": found[0], "reason": found[1].reason})
        # made inside a delegating call: that call must be running in this run
        parent = (
            None
            if at.parent_span_id is None  # no parent named: nothing to look up
            else await delegation.parent_denial(state.store, ctx, at.parent_span_id, at.call_id)
        )
        if parent is not None and not observe:
            return await answers.refuse(at, parent, CallStatus.DENIED)
        if parent is not None:
            at.would.append({"phase": "delegation", "reason": parent.reason})
            at.parent_span_id = None
        # declared artifact inputs: registered in this run, checksum-verified
        if contract.artifact_inputs:
            try:
                await check_inputs(state.artifacts, ctx.run_id, contract, at.arguments)
            except Failure as exc:
                if not observe:
                    return await answers.refuse(at, exc, CallStatus.REJECTED)
                at.would.append({"phase": "artifact_inputs", "reason": exc.reason})
        # 3. budgets that are not counted at reservation: the run's elapsed time
        budget_error: Failure | None = None
        if settings.run_elapsed_budget_s is not None:
            known, budget_error = state.elapsed_known(ctx, settings.run_elapsed_budget_s)
            if not known:
                budget_error = await state.elapsed_budget(ctx)
        if budget_error is not None and not observe:
            return await answers.refuse(at, budget_error, CallStatus.DENIED)
        at.summary = state.summary(
            contract, at.arguments, state.redactor_of(at), size=accepted.size
        )
        mark(("reservation", time_ns()))
        # 5-7. idempotency reservation, approval gate, intent — retried when a concurrent
        # caller wins the reservation, so we then read its row.
        gated = contract.requires_approval and (
            not observe or contract.id not in settings.modes.observe_without_approval
        )
        approval_to_consume: ApprovalRow | None = None
        for attempt in range(_RESERVE_ATTEMPTS):
            if attempt > 2:  # contended: let the winners' appends through first
                await asyncio.sleep(state.jitter(0.001 * attempt))
            # A call that needs no approval reserves optimistically: the store refuses a
            # duplicate or a call in an ended run (StoreConflict), and only then are the
            # existing row and the run read (an ended run answers receipts only).
            optimistic = attempt == 0 and not gated and ctx.run_id not in state.ended_runs
            ended = False if optimistic else await state.run_ended(ctx.run_id)
            # 5. idempotency reservation: a reserved call id answers from its row
            row = None if optimistic else await state.call_row(ctx, at.call_id)
            if row is not None:
                if row.fingerprint != at.fingerprint or row.tool_id != contract.id:
                    return await answers.conflict(at)
                if row.state in TERMINAL_STATES:
                    return await answers.cached(row, at)
                if row.state == "dispatching":
                    return await self.dispatcher.coalesce(at, row)
            if ended:
                refusal = PermissionDenied(
                    "the run has ended; nothing more runs in it", reason="RUN_ENDED"
                )
                return await answers.refuse(at, refusal, CallStatus.DENIED)
            # 6. approval gate
            mark(("approval", time_ns()))
            if gated:
                gate = await self.approvals.check(at, row)
                if gate is None:
                    continue  # lost a race; read the winner's row
                if isinstance(gate, Envelope):
                    return gate
                approval_to_consume = gate
                at.timeline.waited = _requested(gate)
            elif contract.requires_approval:
                at.would.append({"phase": "approval", "reason": "APPROVAL_REQUIRED"})
            # a remote executor is trusted only as far as its last readiness check (cached
            # briefly): one that changed since the context was resolved is refused here.
            if self.readiness is not None:
                changed = await self.readiness.check_call(contract)
                if changed is not None:
                    return await answers.refuse(at, changed, CallStatus.FAILED)
            faults.point("before_intent", contract.id)
            # 7. intent
            mark(("intent", time_ns()))
            try:
                await self.dispatcher.intent(at, approval_to_consume)
            except StoreConflict:
                continue
            except InvalidInput as exc:
                if exc.reason == "ILLEGAL_TRANSITION":
                    # The run's status changed after the intent decided it (see
                    # ApprovalGate.check and Dispatcher.intent): decide again.
                    continue
                if approval_to_consume is None or exc.reason != "APPROVAL_NOT_APPROVED":
                    raise
                # A concurrent duplicate consumed the approval first: read its row (coalesce).
                approval_to_consume = None
                continue
            except ResourceLimit as exc:
                return await answers.refuse(at, exc, CallStatus.DENIED)
            except StoreError as exc:
                if exc.reason != "STORE_IO_ERROR":
                    raise  # not written: the call failed and nothing started
                # The intent's commit failed: it may be durable (a restart then finds the call
                # in flight and reconciles it to unknown), so say unknown; nothing dispatched.
                return answers.answer(at, CallStatus.UNKNOWN, exc, tool=contract.id)
            break
        else:
            lost = InternalFailure("could not reserve the call id", reason="RESERVATION_LOST")
            return await answers.refuse(at, lost, CallStatus.FAILED)
        faults.point("after_intent", contract.id)
        # 8-10. dispatch, acceptance, outcome
        mark(("dispatch", time_ns()))
        return await self.dispatcher.dispatch(at)
