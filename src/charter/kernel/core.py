"""What the kernel's parts share: the attempt being decided, and the kernel's state.

:class:`Attempt` is the one object the phases of :meth:`charter.kernel.kernel.Kernel.call`
pass each other; :class:`KernelState` holds the dependencies (build, store, clock, ids,
settings, redactor, audit sink, executors, artifacts) and the caches derived from contracts,
and is handed to the kernel's parts (:class:`~charter.kernel.answers.Answers`,
:class:`~charter.kernel.approvals.ApprovalGate`, :class:`~charter.kernel.dispatch.Dispatcher`,
:class:`~charter.kernel.operators.Operators`) when the kernel builds them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from charter.artifacts.service import ArtifactService
from charter.contracts.canonical import Fingerprinter, canonical_bytes
from charter.contracts.fastinit import maker
from charter.contracts.intake import Intake
from charter.contracts.model import ToolContract
from charter.contracts.preview import arguments_record, preview
from charter.contracts.schema import CompiledSchema, compile_schema
from charter.errors import Failure, InvalidInput, ResourceLimit
from charter.kernel import faults
from charter.kernel.audit import AuditSink
from charter.kernel.authorize import Hook
from charter.kernel.contexts import ContextProvider, ResolvedContext
from charter.kernel.executor_port import Executor
from charter.kernel.flight import Flight
from charter.kernel.leases import OwnerLease
from charter.kernel.principals import Principal
from charter.kernel.redaction import Redactor
from charter.kernel.settings import KernelSettings
from charter.kernel.store import KernelStore
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import NewEvent
from charter.ledger.ids import new_id
from charter.ledger.trust import refuse_vanished
from charter.ledger.views import ApprovalRow, CallRow, ContextRow, RunRow
from charter.project.build import Build

_RUN_ENDED = frozenset({"completed", "partial", "failed", "cancelled"})


def _parse_at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _process_start() -> str:
    """A token that changes when the pid is reused: the process start time from /proc."""
    try:
        with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return str(time.time_ns())


class Timeline:
    """When each phase of one call began (``time.time_ns()``), and the approval wait it ended,
    for its trace spans and the per-phase histograms (:mod:`charter.telemetry`). Shared by
    the arrival and its attempt."""

    __slots__ = ("marks", "waited")

    def __init__(self) -> None:
        self.marks: list[tuple[str, int]] = [("attribution", time.time_ns())]
        self.waited: tuple[int, str] | None = None  # (requested at, approval id)

    def mark(self, phase: str) -> None:
        self.marks.append((phase, time.time_ns()))


@dataclass(slots=True, kw_only=True, eq=False)
class Arrival:
    """A call as it arrives: who asks for which tool under which call id, and what any answer
    about it needs (its start time and trace), before its context is known."""

    call_id: str
    tool: str  # the name the caller asked for
    principal: Principal
    task_id: str | None = None
    presented: str | None = None  # the approval id the caller presented
    started: float  # ``time.perf_counter()`` at arrival
    trace: dict[str, str]  # ``trace_id`` and ``span_id``
    # the delegating call's span this call is made in (docs/kernel.md, "Delegation")
    parent_span_id: str | None = None
    timeline: Timeline = field(default_factory=Timeline)
    flight: Flight = field(default_factory=Flight)  # how far it got (charter.kernel.flight)

    def attempt(self, ctx: ResolvedContext) -> Attempt:
        """The attempt to decide this call in its (attributed) context: this arrival's
        fields, ``ctx``, and the defaults of the rest (:func:`_promoter`)."""
        self.flight.attempt = attempt = _promote(self, ctx)
        return attempt


_NO_POINTER_REASONS = frozenset(
    {"ARGS_TOO_LARGE", "ARGS_INVALID_UTF8", "ARGS_MALFORMED_JSON", "ARGS_NOT_OBJECT"}
)
"""Intake rejections whose message names no key of the arguments (nothing to scrub)."""


@dataclass(slots=True, kw_only=True, eq=False)
class Attempt(Arrival):
    """One call being decided: what the phases share, filled in as they pass.

    Attribution fixes the context and the call's ``mode`` (scoped: tool, agent, profile,
    then the deployment's); ``contract`` is set as soon as the context offered the tool (a
    refusal before that never names the tool; after it, audit records name it); ``arguments``,
    ``fingerprint`` and ``summary`` once validation accepts the arguments;
    ``idempotency_key`` once the intent is committed. ``warnings`` go into the answer,
    ``would`` (what observe mode let through) into the intent.
    """

    ctx: ResolvedContext
    contract: ToolContract | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: str | None = None
    summary: Any = None
    redactor: Redactor | None = None  # the call's redactor, made once (KernelState.redactor_of)
    idempotency_key: str | None = None
    warnings: list[str] = field(default_factory=list)
    would: list[dict[str, str]] = field(default_factory=list)
    mode: str | None = None  # the call's effective mode; None: the deployment's

    @property
    def run_id(self) -> str:
        return self.ctx.run_id

    @property
    def context_id(self) -> str:
        return self.ctx.context_id

    def bound(self) -> ToolContract:
        """The contract, for the phases that only run once it is known."""
        assert self.contract is not None, "the contract is set after authorization"
        return self.contract


def _promoter() -> Callable[[Arrival, ResolvedContext], Attempt]:
    """What ``Attempt(**arrival's fields, ctx=ctx)`` makes, generated from the two classes'
    fields: plain attribute stores on a new ``Attempt`` (a quarter of the work of the
    dataclass ``__init__`` with its eleven keywords, once per governed call)."""
    inherited = {f.name for f in dataclasses.fields(Arrival)}
    scope: dict[str, Any] = {"_new": object.__new__, "_Attempt": Attempt}
    lines = ["def promote(arrival, ctx):", "    at = _new(_Attempt)"]
    for index, f in enumerate(dataclasses.fields(Attempt)):
        if f.name in inherited:
            value = f"arrival.{f.name}"
        elif f.name == "ctx":
            value = "ctx"
        elif f.default is not dataclasses.MISSING:
            scope[f"_default{index}"] = f.default
            value = f"_default{index}"
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory{index}"] = f.default_factory
            value = f"_factory{index}()"
        else:
            raise TypeError(f"Attempt.{f.name} needs a value")
        lines.append(f"    at.{f.name} = {value}")
    exec("\n".join([*lines, "    return at", ""]), scope)  # from the classes' own fields
    promote: Callable[[Arrival, ResolvedContext], Attempt] = scope["promote"]
    return promote


_promote = _promoter()


@dataclass(frozen=True, slots=True)
class ArgumentViews:
    """The three views of a call's redacted arguments the kernel may keep.

    ``record`` (shape, plus the contract's ``audit`` fields) goes into events and call rows;
    ``preview`` (clamped per field) and ``full`` go only into an approval request, the
    evidence of what a person approved.
    """

    record: dict[str, Any] = field(repr=False)
    preview: Any = field(repr=False)
    full: Any = field(repr=False)


# Once per governed call each (contracts/fastinit.py).
make_arrival = maker(Arrival)
_make_views = maker(ArgumentViews)


class KernelState:
    """The kernel's dependencies and caches, shared by its parts.

    One mutable object: the runtime sets ``artifacts`` after building the kernel, and tests
    swap ``settings``, ``clock`` or ``redactor`` on a live kernel; every part reads them here.
    """

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
        # The run's artifact store and the ledger-backed registry, set by the runtime.
        # ``None``: tools that declare artifacts get no writer (``ctx.artifacts`` is None).
        self.artifacts: ArtifactService | None = None
        self._hex = hex_source
        self._random = random.Random()
        self._intakes: dict[str, Intake] = {}
        self._redactors: dict[str, Redactor] = {}
        self._result_schemas: dict[str, CompiledSchema | None] = {}
        self._run_created: dict[str, datetime] = {}
        self._expiries: dict[str, datetime] = {}  # a context's expires_at, parsed
        self._agent_tools: dict[str, frozenset[str]] = {}
        self.catalog_runs: dict[str, bool] = {}  # run id -> a catalog run (kernel/task_auth)
        self.contexts: dict[str, ResolvedContext] = {}
        self.owner = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "start": _process_start(),
            "lease": new_id("own"),
        }
        self.lease = OwnerLease(store, self.now, self.owner, self.settings.lease_ttl_s)
        self.ended_runs: set[str] = set()  # runs seen terminal (nothing leaves that)
        self.flying: Counter[tuple[str, str]] = Counter()  # (context, call) running here
        self.build_activated = False  # charter.kernel.builds.activate, once per kernel
        faults.arm()  # test-only fault points: the environment as this kernel opens

    # -----------------------------------------------------------------------------------
    # ids and time

    def new_id(self, slug: str) -> str:
        return new_id(slug, hex_source=self._hex) if self._hex else new_id(slug)

    def trace_id(self, slug: str) -> str:
        """Trace and span ids identify, they do not authorize: no system entropy needed."""
        if self._hex:
            return new_id(slug, hex_source=self._hex)
        return f"{slug}-{self._random.getrandbits(48):012x}"

    def trace(self, trace_id: str | None) -> dict[str, str]:
        """A call's ``trace_id`` (``trace_id``, or a new one) and new ``span_id``: what two
        :meth:`trace_id` calls give, both new ones from one draw of 96 random bits."""
        if self._hex or trace_id:
            trace_id = trace_id or self.trace_id("trace")
            return {"trace_id": trace_id, "span_id": self.trace_id("span")}
        drawn = self._random.getrandbits(96).to_bytes(12, "big").hex()
        return {"trace_id": "trace-" + drawn[:12], "span_id": "span-" + drawn[12:]}

    def now(self) -> datetime:
        return self.clock()

    def jitter(self, upto: float) -> float:
        """A random delay in ``[0, upto]`` seconds (backing off a contended append)."""
        return self._random.uniform(0, upto)

    # -----------------------------------------------------------------------------------
    # what a contract compiles to (cached by digest)

    def intake(self, contract: ToolContract) -> Intake:
        intake = self._intakes.get(contract.digest)
        if intake is None:
            intake = Intake(contract.args_schema, self.fingerprinter)
            self._intakes[contract.digest] = intake
        return intake

    def agent_tools(self, agent: str | None) -> frozenset[str] | None:
        """The tools the Build lets ``agent`` call (``None`` without an agent), made once per
        agent: the Build never changes under a kernel. ``KeyError`` for an unknown agent."""
        if not agent:
            return None
        tools = self._agent_tools.get(agent)
        if tools is None:
            tools = self._agent_tools[agent] = frozenset(self.build.agents[agent].tools)
        return tools

    def result_schema(self, contract: ToolContract) -> CompiledSchema | None:
        if contract.digest not in self._result_schemas:
            self._result_schemas[contract.digest] = (
                compile_schema(contract.result_schema) if contract.result_schema else None
            )
        return self._result_schemas[contract.digest]

    def redactor_for(self, contract: ToolContract) -> Redactor:
        """The deployment's redactor plus the contract's ``redact`` pointers (cached)."""
        redactor = self._redactors.get(contract.digest)
        if redactor is None:
            redactor = self.redactor.with_pointers(contract.redact)
            self._redactors[contract.digest] = redactor
        return redactor

    def call_redactor(self, contract: ToolContract, arguments: Mapping[str, Any]) -> Redactor:
        """The contract's redactor that also scrubs this call's secret argument values
        wherever else they appear (inside a URL, under an innocent key, as a key)."""
        redactor = self.redactor_for(contract)
        secrets = redactor.secret_values(arguments)
        return redactor.remember(secrets) if secrets else redactor

    def input_refusal(
        self, contract: ToolContract, arguments: object, exc: InvalidInput
    ) -> InvalidInput:
        """A rejection of ``arguments`` with its message scrubbed of the call's own secret
        argument values: it may name an argument's pointer, made of keys the caller chose
        (``argument /<key> property is not allowed here``), and a secret value used as a key
        must not come back. The arguments are read leniently (the strict parse may be what
        refused them); ones that cannot be read, or hold no secret, leave ``exc`` as it is."""
        if exc.reason in _NO_POINTER_REASONS:
            return exc
        parsed = arguments
        if isinstance(arguments, str | bytes):
            try:
                parsed = json.loads(arguments)
            except (ValueError, RecursionError):
                return exc
        if not isinstance(parsed, Mapping):
            return exc
        redactor = self.call_redactor(contract, parsed)
        message = redactor.redact_text(exc.message)
        if message == exc.message:
            return exc
        return InvalidInput(message, reason=exc.reason, details=redactor.redact(exc.details))

    def redactor_of(self, at: Attempt) -> Redactor:
        """:meth:`call_redactor` of an attempt's contract and arguments, made once per call
        (the progress channel, the artifact writer and acceptance share it)."""
        if at.redactor is None:
            at.redactor = self.call_redactor(at.bound(), at.arguments)
        return at.redactor

    def summary(
        self,
        contract: ToolContract,
        arguments: Mapping[str, Any],
        redactor: Redactor | None = None,
        *,
        size: int | None = None,
    ) -> ArgumentViews:
        """What may be kept of a call's arguments (docs/privacy.md): see :class:`ArgumentViews`.
        ``redactor``: the call's (:meth:`redactor_of`), when the caller has it; ``size``: the
        length of the canonical JSON of ``arguments``, when the caller has it."""
        if redactor is None:
            redactor = self.call_redactor(contract, arguments)
        redacted = redactor.redact(arguments)  # a copy: never the caller's arguments
        # Redaction only replaces strings (and renames keys): a copy equal to the arguments
        # holds the same strings and the very same other leaves, so the same canonical JSON.
        if size is None or redacted != arguments:
            size = len(canonical_bytes(redacted))
        return _make_views(
            record=arguments_record(redacted, contract.audit, size=size),
            preview=preview(redacted, self.settings.summary_max_bytes, size=size),
            full=redacted,
        )

    # -----------------------------------------------------------------------------------
    # reads and small derivations the phases share

    async def context(self, context_id: str, tenant: str | None = None) -> ResolvedContext | None:
        """The context, or None; one whose row was deleted outside Charter refuses its run
        (to ``tenant``, the caller's, when its run is that tenant's; None: to any caller)."""
        cached = self.contexts.get(context_id)
        if cached is not None:
            return cached
        rows = await self.store.find_views(ContextRow, context_id=context_id, limit=1)
        if not rows:
            await refuse_vanished(self.store, "contexts", context_id, tenant)
            return None
        context = ResolvedContext.from_row(rows[0].row)
        self.contexts[context_id] = context
        return context

    def expiry(self, ctx: ResolvedContext) -> datetime:
        """When ``ctx`` expires (its ``expires_at``, parsed once per text)."""
        at = self._expiries.get(ctx.expires_at)
        if at is None:
            if len(self._expiries) > 10_000:
                self._expiries.clear()
            at = self._expiries[ctx.expires_at] = _parse_at(ctx.expires_at)
        return at

    async def call_row(self, ctx: ResolvedContext, call_id: str) -> CallRow | None:
        return await self.store.read_view(CallRow, ctx.run_id, ctx.context_id, call_id)

    async def elapsed_budget(self, ctx: ResolvedContext) -> Failure | None:
        limit = self.settings.run_elapsed_budget_s
        if limit is None:
            return None
        created = self._run_created.get(ctx.run_id)
        if created is None:
            run = await self.store.read_view(RunRow, ctx.run_id)
            if run is None:
                return None
            created = self._run_created[ctx.run_id] = _parse_at(run.created_at)
        return self._past_elapsed(created, limit)

    def elapsed_known(self, ctx: ResolvedContext, limit: float) -> tuple[bool, Failure | None]:
        """:meth:`elapsed_budget` without a coroutine once the run's creation is known:
        ``(True, its answer)``; ``(False, None)`` when it is not (await the coroutine)."""
        created = self._run_created.get(ctx.run_id)
        return (False, None) if created is None else (True, self._past_elapsed(created, limit))

    def _past_elapsed(self, created: datetime, limit: float) -> Failure | None:
        elapsed = (self.now() - created).total_seconds()
        if elapsed > limit:
            return ResourceLimit(
                f"the run is past its elapsed-time budget of {limit} s",
                reason="RUN_TIME_BUDGET_EXCEEDED",
                details={"limit_s": limit},
            )
        return None

    def idempotency_key(self, ctx: ResolvedContext, call_id: str, fingerprint: str) -> str:
        raw = f"{ctx.context_id}\x00{call_id}\x00{fingerprint}".encode()
        return "idk-" + hashlib.sha256(raw).hexdigest()[:40]

    async def run_ended(self, run_id: str) -> bool:
        """Whether the run reached a terminal status (remembered: nothing leaves one)."""
        if run_id in self.ended_runs:
            return True
        run = await self.store.read_view(RunRow, run_id)
        if run is not None and run.status in _RUN_ENDED:
            self.ended_runs.add(run_id)
            return True
        return False

    async def resume_run(self, run_id: str, *, exclude: str) -> list[NewEvent]:
        """``input_required → running`` once no other approval of the run is pending."""
        run = await self.store.read_view(RunRow, run_id)
        if run is None or run.status != "input_required":
            return []
        pending = await self.store.find_views(ApprovalRow, run_id=run_id, status="pending")
        if any(r.approval_id != exclude for r in pending):
            return []
        return [NewEvent(type="run_status_changed", payload={"status": "running", "by": "kernel"})]
