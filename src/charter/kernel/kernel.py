"""The kernel: the one governed call path every entry point uses (DESIGN §3).

:meth:`Kernel.call` reads top to bottom as the phases::

    1 attribution → 2 disclosure & authorization → 3 budgets → 4 validation
    → 5 idempotency reservation → 6 approval gate → 7 intent → 8 dispatch
    → 9 acceptance → 10 outcome

Durable decisions are events in the context's run, appended through the store; the store's
transaction (projection handlers in :mod:`charter.ledger.calls_projection`) is what makes the
reservation of a call id and the budgets exact, whether the duplicates come from coroutines in
one process or from several processes sharing the store. Nothing here imports the server, MCP,
provider or adapter layers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from charter.contracts.model import ToolContract
from charter.errors import (
    Failure,
    InternalFailure,
    InvalidInput,
    PermissionDenied,
    ResourceLimit,
    StoreConflict,
    TransientExternal,
)
from charter.kernel import faults
from charter.kernel.approvals import ApprovalGate
from charter.kernel.artifacts import check_inputs
from charter.kernel.authorize import AuthorizationInput, authorize
from charter.kernel.contexts import (
    Attachment,
    OfferedTool,
    ResolvedContext,
    estimate_tokens,
    schema_digest,
)
from charter.kernel.core import Attempt, _parse_at
from charter.kernel.dispatch import Dispatcher
from charter.kernel.envelope import TERMINAL_STATES, CallStatus, Envelope
from charter.kernel.operators import Operators
from charter.kernel.principals import Principal
from charter.kernel.readiness_port import ReadinessSource
from charter.kernel.settings import Mode
from charter.kernel.task_auth import task_denial
from charter.ledger.events import NewEvent, format_at
from charter.ledger.projections import run_key

CALL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
ADHOC_SLUG = "adhoc"


class Kernel(ApprovalGate, Dispatcher, Operators):
    """The governed call path over one Build, one store and one deployment."""

    # Set by the runtime: tools that are not ready are omitted (optional) or block resolution
    # (required). ``None``: every bound tool counts as ready.
    readiness: ReadinessSource | None = None

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
    ) -> ResolvedContext:
        """Resolve and record a context; an ad-hoc run is created when ``run_id`` is None."""
        if profile not in self.build.profiles:
            raise InvalidInput(f"unknown profile {profile!r}", reason="PROFILE_UNKNOWN")
        agent_tools: frozenset[str] | None = None
        if agent is not None:
            if agent not in self.build.agents:
                raise InvalidInput(f"unknown agent {agent!r}", reason="AGENT_UNKNOWN")
            agent_tools = frozenset(self.build.agents[agent].tools)
        contracts = [
            c
            for c in self.build.profile_tools(profile)
            if self._visible(principal, c, agent, agent_tools)
        ]
        if self.readiness is not None and contracts:
            report = await self.readiness.report()
            ready = []
            for c in contracts:
                state = report.get(c.id)
                if state is None or state.ready:
                    ready.append(c)
                elif state.required:
                    raise TransientExternal(
                        f"required tool {c.id} is not ready: {state.reason} ({state.message})",
                        reason="TOOL_NOT_READY",
                        details={"tool": c.id, "readiness_reason": state.reason},
                        retryable=state.reason == "EXECUTOR_UNREACHABLE",
                    )
            contracts = ready
        resolved: list[Attachment] = []
        unresolved: list[str] = []
        allowed_providers = (
            set(self.build.agents[agent].context_providers) if agent is not None else None
        )
        for kind, ref in attachments:
            provider = self.providers.get(kind)
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
        if tokens > self.settings.token_budget:
            raise ResourceLimit(
                f"the context needs about {tokens} tokens; the budget is "
                f"{self.settings.token_budget}",
                reason="CONTEXT_BUDGET_EXCEEDED",
                details={"estimate": tokens, "budget": self.settings.token_budget},
            )
        now = self._now()
        entries: list[NewEvent] = []
        if run_id is None:
            run_id = self._id(workflow_slug)
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
            await self._check_run_tenant(run_id, principal)
        context = ResolvedContext(
            context_id=self._id("ctx"),
            run_id=run_id,
            build_digest=self.build.digest,
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
            token_budget=self.settings.token_budget,
            attachments=tuple(resolved),
            unresolved=tuple(unresolved),
            created_at=format_at(now),
            expires_at=format_at(now + timedelta(seconds=self.settings.context_lifetime_s)),
        )
        entries.append(NewEvent(type="context_resolved", payload=context.payload()))
        if self.settings.mode is not Mode.OFF:
            await self.store.append(run_id, entries)
        self._contexts[context.context_id] = context
        self._context_runs[context.context_id] = run_id
        return context

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

    async def _check_run_tenant(self, run_id: str, principal: Principal) -> None:
        """Another tenant's run, or a run that names no tenant, answers like a missing one."""
        run = await self.store.get_row(run_key(run_id))
        if run is None or run.get("tenant") != principal.tenant:
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND")

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
    ) -> Envelope:
        """Run one governed call and answer with its v2 envelope. Never raises a Failure.

        A store failure before the intent was committed means nothing was dispatched: the
        answer is ``failed`` (``internal``), safe to retry with the same call id. After the
        intent, :meth:`_finish` answers ``unknown`` instead.
        """
        started = time.perf_counter()
        trace = {
            "trace_id": trace_id or self._trace_id("trace"),
            "span_id": self._trace_id("span"),
        }
        try:
            return await self._call(
                context_id,
                tool,
                call_id,
                arguments,
                principal,
                approval_id,
                task_id,
                started,
                trace,
            )
        except Failure as exc:
            return self._answer(
                call_id if isinstance(call_id, str) else "",
                CallStatus.FAILED,
                started,
                trace,
                tool=tool,
                error=exc,
            )

    async def _call(
        self,
        context_id: str,
        tool: str,
        call_id: str,
        arguments: str | bytes | Mapping[str, Any],
        principal: Principal,
        approval_id: str | None,
        task_id: str | None,
        started: float,
        trace: dict[str, str],
    ) -> Envelope:
        # 1. attribution
        ctx = await self.get_context(context_id)
        if ctx is None or ctx.tenant != principal.tenant:
            return self._answer(
                call_id,
                CallStatus.DENIED,
                started,
                trace,
                tool=tool,
                error=PermissionDenied("no such context", reason="CONTEXT_NOT_FOUND"),
            )
        at = Attempt(
            ctx=ctx,
            principal=principal,
            tool=tool,
            call_id=call_id if isinstance(call_id, str) else "",
            started=started,
            trace=trace,
        )
        if not isinstance(call_id, str) or not CALL_ID.match(call_id):
            invalid = InvalidInput(
                f"call_id must match {CALL_ID.pattern} (at most 128 characters)",
                reason="CALL_ID_INVALID",
            )
            return await self._refused(at, invalid, CallStatus.REJECTED)
        offered = ctx.offered(tool)
        contract = self.build.tools[offered.id].contract if offered is not None else None
        if self.settings.mode is Mode.OFF:
            return await self._ungoverned(
                ctx, principal, contract, tool, call_id, arguments, started, trace, task_id
            )
        if self._now() >= _parse_at(ctx.expires_at):
            row = await self._call_row(ctx, call_id)
            if row is not None and row["state"] in TERMINAL_STATES:
                return self._receipt(row, started, trace, cached=True)
            expired = PermissionDenied(
                "the context has expired; resolve a new one", reason="CONTEXT_EXPIRED"
            )
            return await self._refused(at, expired, CallStatus.DENIED)
        observe = self.settings.mode is Mode.OBSERVE
        would: list[dict[str, str]] = []
        # 2. disclosure and authorization (the part that needs no arguments)
        inp = AuthorizationInput(
            principal=principal,
            context=ctx,
            tool=tool,
            contract=contract,
            agent_tools=frozenset(self.build.agents[ctx.agent].tools) if ctx.agent else None,
            enablement=self.settings.enablement,
            max_danger=self.settings.max_danger,
        )
        denial = authorize(inp, before_validation=True)
        if denial is not None and (not observe or contract is None):
            return await self._denied(at, denial)
        if denial is not None:
            would.append({"phase": "authorization", "reason": denial.reason})
        assert contract is not None
        # inside a task of a catalog run: its role, profile, tool allowlist and budgets
        if task_id is not None:
            agents = frozenset(self.build.agents)
            denial = await task_denial(
                self.store,
                ctx,
                contract.id,
                task_id,
                call_id=call_id,
                agents=agents,
                now=self._now(),
            )
            if denial is not None and not observe:
                return await self._denied(at, denial, contract=contract)
            if denial is not None:
                would.append({"phase": "task", "reason": denial.reason})
        # 4. validation (strict parse, then the contract's schema), then the rest of phase 2
        try:
            accepted = (
                self._intake(contract).accept(arguments)
                if isinstance(arguments, str | bytes)
                else self._intake(contract).accept_value(arguments)
            )
        except InvalidInput as exc:
            return await self._refused(at, exc, CallStatus.REJECTED, contract=contract)
        denial = authorize(
            replace(inp, arguments=accepted.arguments), ownership=self.ownership_hooks
        )
        if denial is not None and not observe:
            return await self._denied(
                at, denial, contract=contract, fingerprint=accepted.fingerprint
            )
        if denial is not None:
            would.append({"phase": "authorization", "reason": denial.reason})
        # declared artifact inputs: registered in this run, checksum-verified
        if contract.artifact_inputs:
            try:
                await check_inputs(self.artifacts, ctx.run_id, contract, accepted.arguments)
            except Failure as exc:
                if not observe:
                    return await self._refused(
                        at,
                        exc,
                        CallStatus.REJECTED,
                        contract=contract,
                        fingerprint=accepted.fingerprint,
                    )
                would.append({"phase": "artifact_inputs", "reason": exc.reason})
        # 3. budgets that are not counted at reservation: the run's elapsed time
        budget_error = await self._elapsed_budget(ctx)
        if budget_error is not None and not observe:
            return await self._refused(
                at,
                budget_error,
                CallStatus.DENIED,
                contract=contract,
                fingerprint=accepted.fingerprint,
            )
        summary = self._summary(contract, accepted.arguments)
        # 5-7. idempotency reservation, approval gate, intent — retried when a concurrent
        # caller wins the reservation, so we then read its row.
        warnings: list[str] = []
        approval_to_consume: Mapping[str, Any] | None = None
        for attempt in range(5):
            # A call that needs no approval reserves optimistically: the store refuses a
            # duplicate (StoreConflict) and only then is the existing row read.
            optimistic = attempt == 0 and not (contract.requires_approval and not observe)
            row = None if optimistic else await self._call_row(ctx, call_id)
            if row is not None:
                if row["fingerprint"] != accepted.fingerprint or row["tool_id"] != contract.id:
                    return await self._conflict(
                        ctx, principal, contract, call_id, started, trace, accepted.fingerprint
                    )
                if row["state"] in TERMINAL_STATES:
                    return self._receipt(row, started, trace, cached=True)
                if row["state"] == "dispatching":
                    return await self._coalesce(ctx, contract, row, started, trace)
            if contract.requires_approval and not observe:
                gate = await self._approval_gate(
                    ctx,
                    principal,
                    contract,
                    call_id,
                    accepted.fingerprint,
                    summary,
                    row,
                    approval_id,
                    started,
                    trace,
                    warnings,
                )
                if gate is None:
                    continue  # lost a race; read the winner's row
                if isinstance(gate, Envelope):
                    return gate
                approval_to_consume = gate
            elif contract.requires_approval:
                would.append({"phase": "approval", "reason": "APPROVAL_REQUIRED"})
            faults.point("before_intent", contract.id)
            try:
                idem_key = await self._intent(
                    ctx,
                    principal,
                    contract,
                    call_id,
                    accepted.fingerprint,
                    summary,
                    approval_to_consume,
                    task_id,
                    would,
                )
            except StoreConflict:
                continue
            except InvalidInput as exc:
                if approval_to_consume is None or exc.reason != "APPROVAL_NOT_APPROVED":
                    raise
                # A concurrent duplicate consumed the approval first: read its row (coalesce).
                approval_to_consume = None
                continue
            except ResourceLimit as exc:
                return await self._refused(
                    at, exc, CallStatus.DENIED, contract=contract, fingerprint=accepted.fingerprint
                )
            break
        else:
            return self._answer(
                call_id,
                CallStatus.FAILED,
                started,
                trace,
                tool=contract.id,
                error=InternalFailure("could not reserve the call id", reason="RESERVATION_LOST"),
            )
        faults.point("after_intent", contract.id)
        # 8-10. dispatch, acceptance, outcome
        return await self._dispatch(
            ctx,
            principal,
            contract,
            call_id,
            accepted.arguments,
            accepted.fingerprint,
            idem_key,
            started,
            trace,
            task_id,
            warnings,
        )
