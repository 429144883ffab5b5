"""The composition root: a Build, a deployment and a store wired into one kernel.

    async with charter.open("path/to/project") as rt:  # a sketch
        ctx = await rt.resolve_context("app", "editor")
        env = await rt.call(ctx.context_id, "notes.add", "call-1", {"title": "t"}, as_="app")
        if env.status == "pending_approval":
            await rt.approve(env.approval["id"], as_="alice")
            env = await rt.call(ctx.context_id, "notes.add", "call-1", {...}, as_="app")

``open`` accepts a project directory (or ``build="latest"``, or a Build file), a store URL
(``sqlite:///…`` by default, ``postgresql://…``, ``memory:``) and the deployment file;
calls left in flight are reconciled on open. Audit: ``audit.file``, ``audit=``. ``serving=False``
(one-shot CLI commands) leaves the store's current Build as it is (kernel/builds.py).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from charter.artifacts.ledger_registry import LedgerRegistry
from charter.artifacts.ledger_source import store_source
from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.ports import ArtifactStore
from charter.artifacts.service import ArtifactService
from charter.contracts.canonical import Fingerprinter
from charter.contracts.text import shown
from charter.deploy.audit_settings import audit_sinks
from charter.deploy.deployment import (
    Binding,
    Deployment,
    load_deployment,
)
from charter.deploy.http_binding import CertificateAuthority
from charter.deploy.kernel_settings import kernel_settings, ownership_hooks
from charter.deploy.ledger_key import ledger_key_for as ledger_key_for
from charter.deploy.readiness import Readiness, served_bindings
from charter.deploy.secret_ref import SecretRef
from charter.errors import ConfigError, InvalidInput, PermissionDenied, UserError
from charter.executors.http import DEFAULT_MAX_RESPONSE_BYTES, HttpEndpoint, HttpExecutor
from charter.executors.python import PythonExecutor
from charter.executors.subprocess import SubprocessExecutor
from charter.kernel.audit import (
    AuditOutcome,
    AuditRecord,
    AuditSink,
    FanoutAuditSink,
    JsonlAuditSink,
)
from charter.kernel.contexts import ContextProvider, FileContextProvider, ResolvedContext
from charter.kernel.endings import RunOperations
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.executor_port import Executor
from charter.kernel.inflight import CallsInFlight
from charter.kernel.kernel import ADHOC_SLUG, Kernel
from charter.kernel.limits import Limiter, LimitState, ProcessLimitState
from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.readiness_port import ReadinessReport
from charter.kernel.redaction import LOG_FILTER, Redactor
from charter.kernel.settings import KernelSettings
from charter.kernel.store import KernelStore
from charter.ledger.chain import LedgerKey
from charter.ledger.clock import Clock, system_clock
from charter.ledger.events import Event, NewEvent, StoredEvent
from charter.ledger.export_staging import records_dir, sweep_exports
from charter.ledger.ports import RunSnapshot, RunSummary
from charter.ledger.subscribe import read_events
from charter.ledger.trust import RunProblem, stored_tenant
from charter.ledger.verify import VerifyReport, verify_run
from charter.ledger.views import ApprovalRow, ArtifactRow, CallRow, ContextRow, RunRow, TaskRow
from charter.project.build import (
    Build,
    build_project,
    keep_build,
    load_build,
    resolve_build_path,
)
from charter.proof import disclosure
from charter.proposals.calls import store_proposal
from charter.stores.factory import DEFAULT_STORE_URL, open_store
from charter.stores.sqlite import SQLiteStore
from charter.workflows.control import RunControl

T = TypeVar("T")


class Runtime:
    """The one front door: every edge (HTTP, console, MCP, CLI, chat, adapters, services)
    reaches the kernel through these methods, never through ``runtime.kernel``.

    Principals are given by name (resolved in the deployment) or as a :class:`Principal`
    an edge has authenticated. Decisions (approve, reject, resolve an unknown call) have one
    implementation each, here; queries answer within the caller's tenant.
    """

    def __init__(self, *, kernel: Kernel, deployment: Deployment, project_dir: Path | None):
        self.kernel = kernel
        self.deployment = deployment
        self.project_dir = project_dir

    # -----------------------------------------------------------------------------------
    # what the runtime was opened with

    @property
    def build(self) -> Build:
        return self.kernel.build

    @property
    def store(self) -> KernelStore:
        return self.kernel.store

    @property
    def clock(self) -> Clock:
        return self.kernel.clock

    @property
    def redactor(self) -> Redactor:
        """The deployment's redactor (secret values and patterns), as the kernel applies it."""
        return self.kernel.redactor

    fingerprinter = property(lambda self: self.kernel.state.fingerprinter)  # run notes' marks

    @property
    def artifacts(self) -> ArtifactService:
        """The run artifacts: store plus the ledger-backed registry (see docs/artifacts.md)."""
        service = self.kernel.artifacts
        if service is None:
            raise ConfigError("this runtime has no artifact store")
        return service

    async def readiness(self, *, fresh: bool = False) -> ReadinessReport:
        """Every bound tool's readiness (cached a few seconds unless ``fresh``); ``ready``:
        every *required* tool is; ``to_dict()`` is what ``/readyz`` and ``charter check`` show.
        """
        readiness = self.kernel.readiness
        if readiness is None:
            return ReadinessReport(tools=(), checked_at="")
        return await readiness.report(fresh=fresh)

    def principal(self, who: str | Principal) -> Principal:
        if isinstance(who, Principal):
            return who
        found = self.deployment.principals.get(who)
        if found is None:
            known = ", ".join(sorted(self.deployment.principals)) or "(none)"
            raise ConfigError(f"no principal named {shown(who)} in the deployment (known: {known})")
        return found

    # -----------------------------------------------------------------------------------
    # contexts and calls

    async def resolve_context(
        self,
        as_: str | Principal,
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
        """A context for ``as_`` in ``profile`` (a new run unless ``run_id``; a chat or MCP
        session names its ``session_id``, ``workflow_slug`` and ``session``: kernel.sessions)."""
        return await self.kernel.resolve_context(
            self.principal(as_),
            profile,
            agent=agent,
            objective=objective,
            attachments=attachments,
            run_id=run_id,
            session_id=session_id,
            workflow_slug=workflow_slug,
            session=session,
        )

    async def get_context(
        self, context_id: str, *, tenant: str | None = None
    ) -> ResolvedContext | None:
        """A resolved context by id (also once expired: its receipts stay readable); with
        ``tenant``, None for another tenant's. Its run is verified on this process's first
        touch: a context of a refused run raises ``RUN_LEDGER_INVALID``, as its calls do."""
        ctx = await self.kernel.get_context(context_id, tenant)
        if ctx is None or (tenant is not None and ctx.tenant != tenant):
            return None
        await self.store.trust.ensure(self.store, ctx.run_id)
        return ctx

    async def call(
        self,
        context_id: str,
        tool: str,
        call_id: str,
        arguments: str | bytes | Mapping[str, Any],
        *,
        as_: str | Principal,
        approval_id: str | None = None,
        task_id: str | None = None,
        trace_id: str | None = None,
        parent_span_id: str | None = None,
    ) -> Envelope:
        """One governed call, answered with the v2 envelope (never raises a Failure;
        ``CONTEXT_NOT_FOUND`` and the rest are envelopes); ``parent_span_id``: the delegating
        call it is made in (default: the current one). A proposal tool's draft is stored as a
        proposal (:mod:`charter.proposals.calls`)."""
        principal = self.principal(as_)
        envelope = await self.kernel.call(
            context_id,
            tool,
            call_id,
            arguments,
            principal=principal,
            approval_id=approval_id,
            task_id=task_id,
            trace_id=trace_id,
            parent_span_id=parent_span_id,
        )
        if envelope.status is not CallStatus.SUCCEEDED or envelope.tool is None:
            return envelope  # no draft to store (store_proposal's own first test, no coroutine)
        return await store_proposal(self, envelope, principal)

    async def get_call(
        self, context_id: str | None, call_id: str, *, as_: str | Principal
    ) -> CallRow:
        """A call's row in the caller's tenant (``context_id`` None: by its id alone)."""
        row = await self.kernel.get_call(context_id, call_id, self.principal(as_).tenant)
        if row is None:
            raise PermissionDenied("no such call", reason="CALL_NOT_FOUND")
        return row

    async def resolve_call(
        self, context_id: str, call_id: str, *, outcome: str, reason: str, as_: str | Principal
    ) -> CallRow:
        """An operator's finding for an ``unknown`` call: ``succeeded``, ``failed`` or
        ``abandoned`` (the one implementation the CLI and the console use)."""
        return await self.kernel.resolve_call(
            context_id, call_id, outcome=outcome, reason=reason, operator=self.principal(as_)
        )

    async def reconcile(self) -> list[CallRow]:
        """Calls a dead process on this host left ``dispatching`` become ``unknown`` (the
        rows as they were before)."""
        return await self.kernel.reconcile()

    async def record(self, run_id: str, events: Sequence[NewEvent]) -> None:
        """Append an edge's own events (chat turns, proposals, runs) to a run's ledger."""
        await self.kernel.store.append(run_id, events)

    async def report_disclosure(
        self, context_id: str, report: Mapping[str, Any], *, as_: str | Principal, source: str = ""
    ) -> dict[str, Any]:
        """Record what was sent to the model (docs/kernel.md#model-disclosure); flags back."""
        return await disclosure.record(self, context_id, report, self.principal(as_), source)

    # -----------------------------------------------------------------------------------
    # queries (typed views of the projections)

    async def calls(
        self,
        *,
        tenant: str | None,
        state: str | None = None,
        call_id: str | None = None,
        limit: int = 100,
    ) -> list[CallRow]:
        """Calls of ``tenant`` (None: every tenant, for operations gauges) in a ``state`` or
        with a ``call_id``, oldest change first."""
        where = _where(tenant=tenant, state=state, call_id=call_id)
        return await self.store.find_views(CallRow, limit=limit, **where)

    async def context_record(self, run_id: str, context_id: str) -> ContextRow | None:
        """A context's stored row (its profile, principal, expiry, per-tool call counts)."""
        return await self.store.read_view(ContextRow, run_id, context_id)

    async def run_summaries(self, *, tenant: str, limit: int = 100) -> Sequence[RunSummary]:
        """The tenant's runs, most recently created first, with their event counts."""
        return await self.store.list_runs(limit=limit, tenant=tenant)

    async def snapshot(self, run_id: str) -> RunSnapshot | None:
        """A run's head and projection rows, read together (manifest, run pages)."""
        return await self.store.snapshot(run_id)

    async def events(self, run_id: str, *, after: int = 0, limit: int = 500) -> Sequence[Event]:
        """Up to ``limit`` of a run's events after ``after``, continuity checked."""
        return await read_events(self.store, run_id, after=after, limit=limit)

    async def verify(self, run_id: str, key: LedgerKey) -> VerifyReport:
        """Verify a run: chain, head MAC, lifecycles, projections and artifact files."""
        source = store_source(lambda: self.artifacts.store, run_id)
        return await verify_run(self.store, run_id, key, artifacts=source)

    async def stored_events(
        self, run_id: str, *, after: int = 0, limit: int = 1000
    ) -> Sequence[StoredEvent]:
        """A run's events after ``after`` as stored (unchecked: ``runs verify`` checks them)."""
        return await self.store.read_stored(run_id, after=after, limit=limit)

    async def stored_tenant(self, run_id: str) -> str | None:
        """The tenant a run's first event names as stored (unchecked), or None: who may
        still verify, or be told about, a run refused for its ledger (rows not served)."""
        return await stored_tenant(self.store, run_id)

    async def run(self, run_id: str) -> RunRow | None:
        return await self.store.read_view(RunRow, run_id)

    async def tasks(self, run_id: str) -> list[TaskRow]:
        """A run's tasks in creation order."""
        return await self.store.find_views(TaskRow, run_id=run_id, limit=10_000)

    async def artifact_rows(self, run_id: str) -> list[ArtifactRow]:
        """A run's registered artifacts in registration order."""
        return await self.store.find_views(ArtifactRow, run_id=run_id, limit=100_000)

    async def runs(
        self, *, session_id: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[RunRow]:
        """Runs of a session or in a status, oldest first."""
        where = _where(session_id=session_id, status=status)
        return await self.store.find_views(RunRow, limit=limit, **where)

    # -----------------------------------------------------------------------------------
    # approvals

    async def approve(
        self,
        approval_id: str,
        *,
        as_: str | Principal | None = None,
        token: str | None = None,
        tenant: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRow:
        return await self.decide(
            approval_id, approve=True, as_=as_, token=token, tenant=tenant, reason=reason
        )

    async def reject(
        self,
        approval_id: str,
        *,
        as_: str | Principal | None = None,
        token: str | None = None,
        tenant: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRow:
        return await self.decide(
            approval_id, approve=False, as_=as_, token=token, tenant=tenant, reason=reason
        )

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        as_: str | Principal | None = None,
        token: str | None = None,
        tenant: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRow:
        """Approve or reject: the one implementation the CLI, HTTP and the console use.

        The decider is an operator principal (``as_``) or, in a standalone deployment, the
        approval token with the tenant it decides in. A token that does not match is
        ``AUTH_INVALID``; an application principal is ``APPROVER_NOT_HUMAN`` (kernel).
        """
        if as_ is not None:
            return await self.kernel.decide(
                approval_id, approve=approve, principal=self.principal(as_), reason=reason
            )
        if token is not None and not self.deployment.approval_token_matches(token):
            raise PermissionDenied("the approval token is not valid", reason="AUTH_INVALID")
        return await self.kernel.decide(
            approval_id,
            approve=approve,
            token=token,
            tenant=tenant,
            reason=reason,
            token_matches=self.deployment.approval_token_matches,
        )

    async def approvals(
        self,
        *,
        as_: str | Principal | None = None,
        tenant: str | None = None,
        status: str | None = None,
        limit: int = 100,
    ) -> list[ApprovalRow]:
        """Approvals of ``as_``'s tenant (or ``tenant``; neither: every tenant, for
        operations gauges), oldest first."""
        if as_ is not None:
            tenant = self.principal(as_).tenant
        # An approval past its lifetime is recorded expired first: never listed as pending.
        await self.kernel.expire_approvals(tenant=tenant)
        where = _where(tenant=tenant, status=status)
        return await self.store.find_views(ApprovalRow, limit=limit, **where)

    async def find_approval(
        self, approval_id: str, *, as_: str | Principal | None = None, tenant: str | None = None
    ) -> ApprovalRow | None:
        """One approval of ``as_``'s tenant (or ``tenant``), else None: another tenant's
        approval is not found either."""
        scope = self.principal(as_).tenant if as_ is not None else tenant
        if scope is None:
            raise InvalidInput("name the principal or the tenant", reason="TENANT_REQUIRED")
        return await self.kernel.find_approval(approval_id, scope)  # expired when past due

    @property
    def operations(self) -> RunOperations:
        """Operators end runs and tasks; upkeep (:class:`~charter.kernel.endings.RunOperations`)."""
        return RunOperations(self.kernel, self.principal)

    @property
    def workflows(self) -> RunControl:
        """Catalog runs driven task by task (:class:`~charter.workflows.control.RunControl`)."""
        return RunControl(self)

    async def get_approval(
        self, approval_id: str, *, as_: str | Principal, full: bool = False
    ) -> dict[str, Any]:
        """One approval of your tenant as a dict; ``full`` adds its whole redacted arguments
        (operators only: they are what a person approves)."""
        principal = self.principal(as_)
        if full and principal.kind is not PrincipalKind.OPERATOR:
            raise PermissionDenied(
                "only an operator may see an approval's full arguments",
                reason="OPERATOR_REQUIRED",
            )
        row = await self.find_approval(approval_id, as_=principal)
        if row is None:
            raise PermissionDenied("no such approval", reason="APPROVAL_NOT_FOUND")
        return row.to_dict() if full else row.listed()


def _where(**columns: str | None) -> dict[str, str]:
    return {name: value for name, value in columns.items() if value is not None}


def _fingerprinter(deployment: Deployment, project_dir: Path | None) -> Fingerprinter:
    if deployment.fingerprint_key is not None:
        secret = deployment.fingerprint_key.resolve()
        return Fingerprinter(deployment.fingerprint_key.key_id(), secret)
    raise ConfigError(
        "the deployment names no fingerprint key (secrets.fingerprint_key: {env: ...} or "
        "{file: ...})"
    )


def artifact_store(deployment: Deployment, base: Path) -> ArtifactStore:
    """The deployment's artifact store: local under ``.charter/artifacts`` by default, or S3."""
    conf = deployment.artifacts
    quota: dict[str, int] = {}
    if conf.quota_bytes is not None:
        quota["quota_bytes"] = conf.quota_bytes
    if conf.quota_files is not None:
        quota["quota_files"] = conf.quota_files
    if conf.store == "s3":
        from charter.artifacts.s3 import S3ArtifactStore, client  # needs the s3 extra

        assert conf.bucket is not None
        s3 = client(endpoint_url=conf.endpoint_url, region_name=conf.region)
        store = S3ArtifactStore(
            s3,
            conf.bucket,
            prefix=conf.prefix,
            expected_bucket_owner=conf.expected_bucket_owner,
            **quota,
        )
        if conf.expected_bucket_owner is not None:
            store.check_bucket()  # refuse to start on a bucket another account owns
        return store
    root = Path(conf.root) if conf.root else Path(".charter") / "artifacts"
    return LocalArtifactStore(root if root.is_absolute() else base / root, **quota)


def _resolve_source(
    source: str | os.PathLike[str], build_ref: str | None
) -> tuple[Build, Path | None]:
    path = Path(source)
    if path.is_file():
        build = load_build(path)
        return build, None
    if not path.is_dir():
        raise UserError(f"{path} is neither a project directory nor a Build file")
    if build_ref is not None:
        return load_build(resolve_build_path(build_ref, path)), path
    build = build_project(path)
    keep_build(build, path)
    return build, path


def _http_endpoint(binding: Binding) -> HttpEndpoint:
    options = binding.options
    credential, signing_key = options["credential"], options["signing_key"]
    assert isinstance(credential, SecretRef)
    assert isinstance(signing_key, SecretRef)
    return HttpEndpoint(
        url=str(options["url"]),
        credential=credential.resolve(),
        signing_key=signing_key.resolve(),
        timeout_s=options.get("timeout_s"),
        max_response_bytes=int(options.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)),
        ca=ca.pem if isinstance(ca := options.get("ca"), CertificateAuthority) else None,
    )


def _executors(
    build: Build,
    deployment: Deployment,
    project_dir: Path | None,
    redactor: Redactor,
    functions: Mapping[str, Callable[..., Any]] | None,
) -> tuple[dict[str, Executor], Readiness]:
    """One executor per kind (``http`` serves every http binding) and the readiness check."""
    entrypoints = {tool_id: t.entrypoint for tool_id, t in build.tools.items() if t.entrypoint}
    bindings = served_bindings(build, deployment, functions)
    endpoints = {
        tool_id: _http_endpoint(b) for tool_id, b in bindings.items() if b.executor == "http"
    }
    executors: dict[str, Executor] = {
        "python": PythonExecutor(
            redact_message=redactor.message_redactor(),
            root=project_dir,
            entrypoints=entrypoints,
            functions=functions,
        ),
        "subprocess": SubprocessExecutor(
            redact_message=redactor.message_redactor(), entrypoints=entrypoints, root=project_dir
        ),
    }
    http: HttpExecutor | None = None
    if endpoints:
        http = HttpExecutor(
            endpoints=endpoints,
            redact_message=redactor.message_redactor(),
            egress=deployment.egress,
        )
        executors["http"] = http
    mcp = None
    if any(b.executor == "mcp" for b in bindings.values()):
        from charter.executors.mcp import mcp_executor  # needs the mcp extra: only when bound

        mcp = mcp_executor(
            bindings,
            root=project_dir,
            redact_message=redactor.message_redactor(),
            egress=deployment.egress,
        )
        if mcp is not None:
            executors["mcp"] = mcp
    readiness = Readiness(
        build=build,
        bindings=bindings,
        executors=executors,
        root=project_dir,
        functions=frozenset(functions or ()),
        ttl_s=deployment.readiness_ttl_s,
        redact=redactor.redact_text,
    )
    for remote in (http, mcp):
        if remote is not None:
            remote.on_mismatch = readiness.invalidate
    return executors, readiness


async def check_readiness(
    source: str | os.PathLike[str] = ".",
    *,
    deploy: str | os.PathLike[str] | None = None,
    build: str | None = None,
) -> ReadinessReport:
    """Readiness of a project's bindings without opening a store (``charter check``)."""
    the_build, project_dir = _resolve_source(source, build)
    base = project_dir or Path.cwd()
    deployment = load_deployment(Path(deploy) if deploy is not None else None, project_dir=base)
    redactor = deployment.redaction.redactor(deployment.known_secrets())
    executors, readiness = _executors(the_build, deployment, project_dir, redactor, None)
    try:
        return await readiness.report(fresh=True)
    finally:
        for executor in executors.values():
            await executor.aclose()


async def _limiter(deployment: Deployment, url: str, stack: AsyncExitStack) -> Limiter | None:
    """The deployment's rate and concurrency limits: in PostgreSQL when the store is (shared
    by the replicas), else in this process (SQLite and memory stores)."""
    conf = deployment.limits.calls
    if not conf.enabled:
        return None
    state: LimitState
    if url.startswith(("postgresql://", "postgres://")):
        from charter.stores.postgres_limits import PostgresLimitState

        state = await stack.enter_async_context(PostgresLimitState.open(url))
    else:
        state = ProcessLimitState()
    return Limiter(conf, state)


def _audit_refusals(store: Any, kernel: Kernel, stack: AsyncExitStack) -> None:
    """Every run the store's trust refuses gets an audit record (outside the damaged run:
    the audit sinks, and the store's run flags); closing the runtime waits for them."""
    audit = kernel.audit
    trust = getattr(store, "trust", None)
    if audit is None or trust is None:
        return
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[None]] = set()

    def record(problem: RunProblem) -> None:
        entry = AuditRecord(
            at=kernel.clock(),
            actor=None,
            tenant=None,
            tool=None,
            tool_version=None,
            call_id=None,
            context_id=None,
            run_id=problem.run_id,
            outcome=AuditOutcome.RUN_REFUSED,
            code="internal",
            reason="RUN_LEDGER_INVALID",
            details=problem.to_dict(),
        )

        def start() -> None:
            task = loop.create_task(audit.record(entry))
            pending.add(task)
            task.add_done_callback(pending.discard)

        loop.call_soon_threadsafe(start)

    async def drain() -> None:
        await asyncio.sleep(0)  # records found on another thread are started by now
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    trust.on_invalid(record)
    stack.push_async_callback(drain)


@asynccontextmanager
async def open_runtime(
    source: str | os.PathLike[str] = ".",
    *,
    store: str | None = None,
    deploy: str | os.PathLike[str] | None = None,
    build: str | None = None,
    clock: Clock = system_clock,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    providers: Mapping[str, ContextProvider] | None = None,
    audit: Sequence[AuditSink] = (),
    audit_file: str | os.PathLike[str] | None = None,
    reconcile: bool = True,
    serving: bool = True,
    settings: KernelSettings | None = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime (see the module docstring); closes the store and executors on exit."""
    the_build, project_dir = _resolve_source(source, build)
    base = project_dir or Path.cwd()
    deployment = load_deployment(Path(deploy) if deploy is not None else None, project_dir=base)
    fingerprinter = _fingerprinter(deployment, project_dir)
    key = ledger_key_for(base, deploy, deployment=deployment)
    url = store or os.environ.get("CHARTER_STORE") or DEFAULT_STORE_URL
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////") and project_dir:
        url = "sqlite:///" + str((project_dir / url[len("sqlite:///") :]).resolve())
    redactor = deployment.redaction.redactor(deployment.known_secrets())
    executors, readiness = _executors(the_build, deployment, project_dir, redactor, functions)
    bindings = {tool_id: b.executor for tool_id, b in readiness.bindings.items()}
    sinks = audit_sinks(deployment.audit, audit, audit_file, source=deployment.source)
    all_providers: dict[str, ContextProvider] = {}
    if project_dir is not None:
        all_providers["docs"] = FileContextProvider(project_dir / "context")
    all_providers.update(providers or {})
    async with AsyncExitStack() as stack:
        for sink in sinks:  # closed last: the refused-run records below still reach them
            if isinstance(sink, JsonlAuditSink):
                stack.callback(sink.close)
        LOG_FILTER.learn(redactor)
        stack.callback(LOG_FILTER.forget, redactor)
        guard = CallsInFlight()
        the_store = await stack.enter_async_context(
            open_store(url, key=key, clock=clock, in_flight=guard)
        )
        guard.store = the_store  # type: ignore[assignment]
        kernel = Kernel(
            build=the_build,
            store=the_store,  # type: ignore[arg-type]
            fingerprinter=fingerprinter,
            executors=executors,
            bindings=bindings,
            settings=settings or kernel_settings(deployment),
            redactor=redactor,
            audit=FanoutAuditSink(sinks) if sinks else None,
            providers=all_providers,
            ownership_hooks=ownership_hooks(deployment, project_dir),
            clock=clock,
        )
        kernel.readiness = readiness
        if isinstance(the_store, SQLiteStore):  # a lone call commits without thread hand-offs
            flying = kernel.state.flying
            the_store.inline = lambda: len(flying) <= 1
        kernel.limiter = await _limiter(deployment, url, stack)
        stack.push_async_callback(kernel.lease.aclose)  # before the store closes
        _audit_refusals(the_store, kernel, stack)
        artifacts = artifact_store(deployment, base)
        sweep = getattr(artifacts, "sweep", None)
        if sweep is not None:  # staging leftovers of writers that died (logged one by one)
            await asyncio.to_thread(sweep)
        if project_dir is not None:  # half-written exports of dead writers (logged too)
            await asyncio.to_thread(sweep_exports, records_dir(project_dir))
        kernel.artifacts = ArtifactService(
            store=artifacts,
            registry=LedgerRegistry(the_store),
            clock=clock,
        )
        kernel.artifacts.contains_secret = redactor.contains_secret
        for executor in executors.values():
            stack.push_async_callback(executor.aclose)
        if reconcile and deployment.mode.value != "off":
            await kernel.maintain_on_open(activate=serving)
        yield Runtime(kernel=kernel, deployment=deployment, project_dir=project_dir)


class SyncRuntime:
    """A small synchronous façade for scripts: runs the async runtime on a private loop.

    with charter.open_sync("demo") as rt:
        ctx = rt.resolve_context("app", "reader")
        print(rt.call(ctx.context_id, "notes.search", "c1", {"query": "x"}, as_="app"))
    """

    def __init__(self, source: str | os.PathLike[str] = ".", **options: Any) -> None:
        self._source = source
        self._options = options
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="charter-sync"
        )
        self._stack: AsyncExitStack | None = None
        self.runtime: Runtime | None = None

    def _run(self, coro: Awaitable[T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        return future.result()

    def __enter__(self) -> SyncRuntime:
        self._thread.start()

        async def enter() -> Runtime:
            self._stack = AsyncExitStack()
            return await self._stack.enter_async_context(
                open_runtime(self._source, **self._options)
            )

        self.runtime = self._run(enter())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stack is not None:
            self._run(self._stack.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _rt(self) -> Runtime:
        if self.runtime is None:
            raise InvalidInput("use SyncRuntime as a context manager", reason="NOT_OPEN")
        return self.runtime

    def resolve_context(self, as_: str, profile: str, **kw: Any) -> ResolvedContext:
        return self._run(self._rt().resolve_context(as_, profile, **kw))

    def call(
        self,
        context_id: str,
        tool: str,
        call_id: str,
        arguments: str | bytes | Mapping[str, Any],
        *,
        as_: str,
        **kw: Any,
    ) -> Envelope:
        return self._run(self._rt().call(context_id, tool, call_id, arguments, as_=as_, **kw))

    def approve(self, approval_id: str, **kw: Any) -> ApprovalRow:
        return self._run(self._rt().approve(approval_id, **kw))

    def reject(self, approval_id: str, **kw: Any) -> ApprovalRow:
        return self._run(self._rt().reject(approval_id, **kw))
