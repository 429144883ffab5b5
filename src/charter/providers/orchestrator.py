"""The orchestrator: one chat message in, Charter's own stream events out (Elsa's
``IAIOrchestrator.ExecuteChatAsync``).

It resolves the agent (instructions are text; they never grant a tool), the context (the
authorized tool set, attachments from tenant-safe providers clamped to a byte budget — the
first attachment truncated rather than dropped), runs the provider's turn with the runtime as
the tool invoker, clamps every tool result before the model sees it, waits for approvals the
kernel asks for, announces the proposals its calls stored, and always ends with
``conversation.completed``. Provider failures reach the client as one safe
``conversation.error``; details go to the log only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from charter.contracts.preview import arguments_record, preview
from charter.errors import Failure, InvalidInput
from charter.kernel.acceptance import model_text
from charter.kernel.contexts import ResolvedContext, schema_digest
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.kernel.redaction import StreamRedactor
from charter.ledger.events import NewEvent, format_at
from charter.proposals.service import ProposalService, draft_from_result
from charter.providers.base import (
    ChatMessage,
    Provider,
    ToolCallRecord,
    ToolInvocation,
    ToolOutcome,
    ToolSpec,
    TurnRequest,
)
from charter.providers.delegation import HANDOFF_TOOL, Delegation, fail_lost_tasks
from charter.providers.events import (
    SAFE_ERROR_MESSAGE,
    MessageCompleted,
    ModelRequested,
    ProviderError,
    StreamEvent,
    TextDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnCompleted,
)

if TYPE_CHECKING:
    from charter.runtime import Runtime

logger = logging.getLogger("charter.chat")
CHAT_SLUG = "chat"
NO_PROVIDER_TEXT = (
    "No model provider is configured for this deployment, so the assistant cannot answer. "
    "Configure one under `chat.provider` in charter.deploy.yaml (see docs/providers.md)."
)
TREND_SCOPE = (
    "Trend and runtime analysis is limited to the attached references, an explicit time "
    "range and the diagnostics scope given with the request."
)
MAX_MESSAGE_CHARS = 64 * 1024
"""The longest user message a turn takes (characters), on every surface."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")
_LABEL = re.compile(r"[^A-Za-z0-9_.:/@+-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatSettings:
    context_budget_bytes: int = 128 * 1024
    result_max_bytes: int = 64 * 1024
    history_bytes: int = 256 * 1024  # the newest messages kept and sent (``windowed``)
    max_rounds: int = 8
    approval_poll_s: float = 0.1
    grace_s: float = 300.0
    retention_s: float = 30 * 24 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    conversation_id: str
    principal: Principal
    message: str
    profile: str
    agent: str | None = None
    attachments: Sequence[tuple[str, str]] = ()
    time_range: Mapping[str, str] | None = None
    diagnostics_scope: str | None = None
    run_id: str | None = None
    history: Sequence[ChatMessage] = ()
    turn_id: str = "t1"


MAX_TIME_RANGE_ENTRIES = 8
MAX_SCOPE_CHARS = 256  # a time range's names (64) and values, the diagnostics scope
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_request(request: ChatRequest) -> None:
    """Refuse a turn's request whose text no store or model request can hold: a message
    outside 1..``MAX_MESSAGE_CHARS`` characters, a time range of more than
    ``MAX_TIME_RANGE_ENTRIES`` entries or longer names or values, text with a lone
    surrogate. ``REQUEST_INVALID`` naming the field, before anything is recorded."""

    def refuse(field: str, why: str) -> InvalidInput:
        return InvalidInput(f"{field} {why}", reason="REQUEST_INVALID", details={"field": field})

    if not 1 <= len(request.message) <= MAX_MESSAGE_CHARS:
        raise InvalidInput(
            f"the message must be 1 to {MAX_MESSAGE_CHARS} characters long "
            f"(it has {len(request.message)})",
            reason="REQUEST_INVALID",
            details={"field": "message"},
        )
    texts: list[tuple[str, str, int]] = [("message", request.message, MAX_MESSAGE_CHARS)]
    if request.diagnostics_scope is not None:
        texts.append(("diagnosticsScope", request.diagnostics_scope, MAX_SCOPE_CHARS))
    span = request.time_range or {}
    if len(span) > MAX_TIME_RANGE_ENTRIES:
        raise refuse("timeRange", f"has {len(span)} entries (at most {MAX_TIME_RANGE_ENTRIES})")
    for name, value in span.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise refuse("timeRange", "must map names to strings")
        texts += [("timeRange", name, 64), (f"timeRange.{name[:64]}", value, MAX_SCOPE_CHARS)]
    for field, text, limit in texts:
        if len(text) > limit:
            raise refuse(field, f"is {len(text)} characters long (at most {limit})")
        if _SURROGATE.search(text):
            raise refuse(field, "contains a lone surrogate (not valid Unicode)")


def clamp(text: str, limit: int) -> tuple[str, bool]:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode("utf-8", "ignore"), True


def clamp_attachments(items: Sequence[tuple[str, str]], budget: int) -> tuple[list[str], bool]:
    """Attachments that fit in ``budget`` bytes; the first is truncated, never dropped."""
    out: list[str] = []
    used, clipped = 0, False
    for index, (label, text) in enumerate(items):
        block = f"[{label}]\n{text}"
        size = len(block.encode("utf-8"))
        if used + size <= budget:
            out.append(block)
            used += size
        elif index == 0:
            cut, _ = clamp(block, budget)
            out.append(cut + "\n[truncated]")
            used, clipped = budget, True
        else:
            clipped = True
    return out, clipped


class Orchestrator:
    def __init__(
        self,
        runtime: Runtime,
        *,
        provider: Provider | None,
        proposals: ProposalService,
        settings: ChatSettings | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.runtime = runtime
        self.provider = provider
        self.proposals = proposals
        self.settings = settings or ChatSettings()
        self.sleep = sleep

    def tool_specs(self, ctx: ResolvedContext) -> list[ToolSpec]:
        specs = []
        for offered in ctx.tools:
            c = self.runtime.build.tools[offered.id].contract
            specs.append(
                ToolSpec(name=c.name, description=c.description, parameters=dict(c.args_schema))
            )
        return specs

    async def resolve(self, request: ChatRequest) -> ResolvedContext:
        return await self.runtime.resolve_context(
            request.principal,
            request.profile,
            agent=request.agent,
            attachments=request.attachments,
            run_id=request.run_id,
            session_id=request.conversation_id,
            workflow_slug=CHAT_SLUG,
            session=True,  # an ended or spent run gives way to a fresh one
        )

    def instructions(self, request: ChatRequest, ctx: ResolvedContext) -> str:
        parts = []
        if request.agent is not None:
            parts.append(self.runtime.build.agents[request.agent].instructions)
        scope = TREND_SCOPE
        if request.time_range:
            scope += f" Time range: {json.dumps(dict(request.time_range), sort_keys=True)}."
        if request.diagnostics_scope:
            scope += f" Diagnostics scope: {request.diagnostics_scope}."
        parts.append(scope)
        blocks, _ = clamp_attachments(
            [(f"{a.kind}:{a.ref}", a.content) for a in ctx.attachments],
            self.settings.context_budget_bytes,
        )
        parts.extend(blocks)
        return "\n\n".join(p for p in parts if p)

    async def execute_chat(
        self, request: ChatRequest, *, first_sequence: int = 1
    ) -> AsyncGenerator[StreamEvent, None]:
        """The turn's stream events, sequence numbers from ``first_sequence``; never raises."""
        seq = first_sequence
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

        def make(type_: str, data: dict[str, Any]) -> StreamEvent:
            nonlocal seq
            event = StreamEvent(
                type=type_,
                conversation_id=request.conversation_id,
                sequence=seq,
                timestamp=format_at(self.runtime.clock()),
                data=data,
            )
            seq += 1
            return event

        provider_name = self.provider.name if self.provider is not None else None
        try:
            ctx = await self.resolve(request)
        except Failure as exc:
            logger.warning("chat context failed: %s", exc.reason)
            yield make("conversation.error", {"message": SAFE_ERROR_MESSAGE, "reason": exc.reason})
            yield make("conversation.completed", {"status": "failed"})
            return
        yield make(
            "conversation.started",
            {
                "provider": provider_name,
                "runId": ctx.run_id,
                "contextId": ctx.context_id,
                "turnId": request.turn_id,
                "tools": [t.name for t in ctx.tools],
                "unresolvedAttachments": list(ctx.unresolved),
            },
        )
        await self._record(
            ctx,
            "chat_turn_started",
            {
                "conversation_id": request.conversation_id,
                "turn_id": request.turn_id,
                "provider": provider_name,
                "agent": request.agent,
                "actor": request.principal.name,
                "message_chars": len(request.message),
            },
        )
        if self.provider is None:
            yield make("assistant.delta", {"text": NO_PROVIDER_TEXT})
            yield make("assistant.completed", {"text": NO_PROVIDER_TEXT})
            await self._record(ctx, "chat_turn_completed", {"turn_id": request.turn_id})
            yield make("conversation.completed", {"status": "completed"})
            return
        for lost in await fail_lost_tasks(self, ctx):
            yield make("task.ended", {"taskId": lost, "status": "failed", "reason": "TURN_LOST"})
        learned: set[str] = set()  # the turn's calls' secret argument values (see invoke)
        delegation = Delegation(self, request, ctx, learned)
        invoker = KernelInvoker(self, ctx, request, queue, delegation=delegation, learned=learned)
        specs = self.tool_specs(ctx)
        if delegation.active and all(spec.name != HANDOFF_TOOL for spec in specs):
            specs.append(delegation.spec())
        turn = TurnRequest(
            conversation_id=request.conversation_id,
            instructions=self.instructions(request, ctx),
            messages=[*request.history, ChatMessage(role="user", text=request.message)],
            tools=specs,
            max_rounds=self.settings.max_rounds,
        )
        status = "completed"
        events = self.provider.execute_turn(turn, invoker)
        task: asyncio.Task[None] | None = None
        pending: list[Any] = []

        async def pump() -> None:
            try:
                async for event in events:
                    pending.append(event)
                    await queue.put(("provider", {}))
            finally:
                await queue.put(None)

        task = asyncio.create_task(pump())
        # text deltas pass a stream redactor: a known secret split over two deltas is held
        # back until it can be scrubbed whole; anything else first emits what is held
        redactor, known = self.runtime.redactor, 0
        deltas = StreamRedactor(redactor)
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                kind, data = item
                event = pending.pop(0) if kind == "provider" else None
                if not isinstance(event, TextDelta) and deltas.pending:
                    yield make("assistant.delta", {"text": deltas.flush()})
                if len(learned) != known:  # a call took a secret: the rest of the turn
                    known = len(learned)  # (the model's text, a role's) is scrubbed of it
                    redactor = self.runtime.redactor.remember(learned)
                    deltas = StreamRedactor(redactor)  # (the old one holds nothing now)
                if event is None:
                    yield make(kind, data)
                    continue
                if isinstance(event, TextDelta):
                    safe = deltas.feed(event.text)
                    if safe:
                        yield make("assistant.delta", {"text": safe})
                elif isinstance(event, MessageCompleted):
                    yield make("assistant.completed", {"text": redactor.redact_text(event.text)})
                elif isinstance(event, ModelRequested):
                    await self.disclose(ctx, request, event, self.sent_attachments(ctx))
                elif isinstance(event, ToolCallRequested):
                    pass  # tool.started is emitted by the invoker with the governed call id
                elif isinstance(event, ToolResultReady):
                    pass  # tool.result is emitted by the invoker
                elif isinstance(event, TurnCompleted):
                    pass
                elif isinstance(event, ProviderError):
                    logger.warning("provider error %s: %s", event.kind, event.detail)
                    status = "failed"
                    # The kind is safe to show (credential_missing, http_401, a class name).
                    yield make(
                        "conversation.error",
                        {"message": SAFE_ERROR_MESSAGE, "reason": f"PROVIDER_{event.kind}"},
                    )
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        except asyncio.CancelledError:
            task.cancel()
            # the turn's tasks fail with it, written shielded from the cancellation
            await asyncio.shield(delegation.end_turn("cancelled"))
            raise
        except Exception as exc:  # the provider's own failure: one safe error, details logged
            logger.warning("chat turn failed: %s", type(exc).__name__, exc_info=True)
            status = "failed"
            yield make(
                "conversation.error",
                {"message": SAFE_ERROR_MESSAGE, "reason": f"PROVIDER_{type(exc).__name__}"},
            )
        finally:
            if not task.done():
                task.cancel()
        if deltas.pending:
            yield make("assistant.delta", {"text": deltas.flush()})
        for task_id, ended in await delegation.end_turn(status):
            yield make("task.ended", {"taskId": task_id, "status": ended})
        await self._record(
            ctx,
            "chat_turn_completed" if status == "completed" else "chat_turn_failed",
            {"turn_id": request.turn_id, "status": status},
        )
        yield make("conversation.completed", {"status": status})

    def sent_attachments(self, ctx: ResolvedContext) -> list[str]:
        """The ids (``kind:ref``) of the attachments the instructions carry after clamping."""
        labels = [f"{a.kind}:{a.ref}" for a in ctx.attachments]
        blocks, _ = clamp_attachments(
            [(label, a.content) for label, a in zip(labels, ctx.attachments, strict=True)],
            self.settings.context_budget_bytes,
        )
        return [label for label in labels if any(b.startswith(f"[{label}]\n") for b in blocks)]

    async def disclose(
        self,
        ctx: ResolvedContext,
        request: ChatRequest,
        event: ModelRequested,
        attachment_ids: Sequence[str],
    ) -> None:
        """Report one model request as a disclosure of ``ctx`` (docs/chat.md): the governed
        tools it carried (the orchestrator's own handoff tool is not one), the digest of their
        schemas, the attachments in the instructions, its token count."""
        tools, contracts = [], []
        for name in event.tools:
            offered = ctx.offered(name)
            if offered is None:
                if name != HANDOFF_TOOL:  # never sent by this orchestrator; flagged if it were
                    tools.append({"id": name, "version": "unknown"})
                continue
            tools.append({"id": offered.id, "version": offered.version})
            contracts.append(self.runtime.build.tools[offered.id].contract)
        report: dict[str, Any] = {
            "tools": tools,
            "schema_digest": schema_digest(contracts),
            "attachment_ids": list(attachment_ids),
            "tokens": event.tokens,
            "tokens_estimated": event.estimated,
        }
        if event.model:
            report["model"] = _LABEL.sub("_", event.model)[:128]
        try:
            await self.runtime.report_disclosure(
                ctx.context_id, report, as_=request.principal, source="chat"
            )
        except Failure as exc:  # the turn goes on; the report's failure is logged
            logger.warning("could not report a disclosure: %s", exc.reason)

    async def _record(self, ctx: ResolvedContext, type_: str, payload: dict[str, Any]) -> None:
        try:
            await self.runtime.record(ctx.run_id, [NewEvent(type=type_, payload=payload)])
        except Failure as exc:  # the turn goes on; the ledger's failure is logged
            logger.warning("could not record %s: %s", type_, exc.reason)

    def call_id(self, request: ChatRequest, model_call_id: str) -> str:
        return _UNSAFE.sub("_", f"{request.turn_id}-{model_call_id}")[:128]


class KernelInvoker:
    """The tool invoker a provider gets: every call is a governed kernel call."""

    def __init__(
        self,
        orchestrator: Orchestrator,
        ctx: ResolvedContext,
        request: ChatRequest,
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None],
        *,
        delegation: Delegation | None = None,
        task_id: str | None = None,
        learned: set[str] | None = None,
    ) -> None:
        self.o = orchestrator
        self.ctx = ctx
        self.request = request
        self.queue = queue
        self.delegation = delegation  # the coordinator's: may hand off
        self.task_id = task_id  # a role's: every call is made inside this task
        # the secret argument values of the turn's calls, shared with the stream (which
        # scrubs them from the model's text from then on) and with the roles' invokers
        self.learned: set[str] = learned if learned is not None else set()

    def for_task(self, ctx: ResolvedContext, task_id: str) -> KernelInvoker:
        """The invoker of a role working a delegated task: its context, calls in the task,
        no further handoffs, the same stream."""
        return KernelInvoker(
            self.o, ctx, self.request, self.queue, task_id=task_id, learned=self.learned
        )

    async def emit(self, type_: str, data: dict[str, Any]) -> None:
        await self.queue.put((type_, data))

    def _summary(self, tool: str, arguments: str, *, approval: bool = False) -> Any:
        """The arguments as streamed and stored with the conversation: their shape (+ the
        contract's audit fields); for an approval, the redacted preview the person decides on
        (as in the approval request itself; docs/privacy.md)."""
        offered = self.ctx.offered(tool)
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return {"unparsed": True}
        if offered is None:
            return None  # never describe a tool the context did not offer
        contract = self.o.runtime.build.tools[offered.id].contract
        redactor = self.o.runtime.redactor.with_pointers(contract.redact)
        secrets = redactor.secret_values(parsed)
        self.learned.update(secrets)
        redactor = redactor.remember(secrets)
        if approval:
            return preview(redactor.redact(parsed), 2048)
        return arguments_record(redactor.redact(parsed), contract.audit)

    async def invoke(self, invocation: ToolInvocation) -> ToolOutcome:
        if (
            self.delegation is not None
            and self.delegation.active
            and invocation.name == HANDOFF_TOOL
            and self.ctx.offered(HANDOFF_TOOL) is None
        ):
            return await self.delegation.handoff(self, invocation)
        runtime = self.o.runtime
        model_call_id = invocation.call_id
        if self.task_id is not None:  # a role's calls never share ids with the coordinator's
            model_call_id = f"{self.task_id}-{model_call_id}"
        call_id = self.o.call_id(self.request, model_call_id)
        principal = self.request.principal
        task = {"taskId": self.task_id} if self.task_id is not None else {}
        await self.emit(
            "tool.started",
            {
                "callId": call_id,
                "tool": invocation.name,
                "arguments": self._summary(invocation.name, invocation.arguments),
                **task,
            },
        )
        envelope = await runtime.call(
            self.ctx.context_id,
            invocation.name,
            call_id,
            invocation.arguments,
            as_=principal,
            task_id=self.task_id,
        )
        while envelope.status is CallStatus.PENDING_APPROVAL and envelope.approval:
            await self.emit(
                "approval.required",
                {
                    "approvalId": envelope.approval["id"],
                    "callId": call_id,
                    "tool": invocation.name,
                    "arguments": self._summary(
                        invocation.name, invocation.arguments, approval=True
                    ),
                    "expiresAt": envelope.approval["expires_at"],
                },
            )
            await self._wait_for_decision(envelope.approval)
            await self.emit("tool.progress", {"callId": call_id, "stage": "approval_decided"})
            again = await runtime.call(
                self.ctx.context_id,
                invocation.name,
                call_id,
                invocation.arguments,
                as_=principal,
                task_id=self.task_id,
            )
            if again.status is CallStatus.PENDING_APPROVAL and again.approval == envelope.approval:
                break  # still pending after its lifetime: answer the model with that
            envelope = again
        content, data = self._content(envelope)
        await self.emit(
            "tool.result",
            {
                "callId": call_id,
                "tool": invocation.name,
                "status": envelope.status.value,
                "error": envelope.error,
                "bytes": len(content.encode("utf-8")),
                **task,
            },
        )
        await self.o._record(
            self.ctx,
            "chat_tool_call",
            {
                "turn_id": self.request.turn_id,
                "call_id": call_id,
                "status": envelope.status.value,
                **({"task_id": self.task_id} if self.task_id is not None else {}),
            },
        )
        await self._proposal(envelope, call_id)
        return ToolOutcome(status=envelope.status.value, content=content, data=data)

    async def _wait_for_decision(self, approval: Mapping[str, Any]) -> None:
        """Poll the shared store (any replica may decide) until decided or expired; no lock
        is held while waiting."""
        runtime = self.o.runtime
        while True:
            row = await runtime.find_approval(approval["id"], tenant=self.ctx.tenant)
            if row is None or row.status != "pending":
                return
            if format_at(runtime.clock()) >= row.expires_at:
                return
            await self.o.sleep(self.o.settings.approval_poll_s)

    def _content(self, envelope: Envelope) -> tuple[str, Any]:
        body = {"status": envelope.status.value, "data": envelope.data, "error": envelope.error}
        text, marker = model_text(body, self.o.settings.result_max_bytes)
        return text, envelope.data if marker is None else marker

    async def _proposal(self, envelope: Envelope, call_id: str) -> None:
        if envelope.status is not CallStatus.SUCCEEDED or envelope.tool is None:
            return
        contract = self.o.runtime.build.tools[envelope.tool].contract
        draft = draft_from_result(envelope.data)
        if contract.effect.value != "proposal" or draft is None or envelope.metrics.cached:
            return
        if not isinstance(draft.get("proposal_id"), str):
            return  # not stored (the answer warns why)
        row = await self.o.proposals.get(draft["proposal_id"], self.ctx.tenant)
        await self.emit(
            "proposal.created",
            {
                "proposalId": row["proposal_id"],
                "kind": row["kind"],
                "target": row["target"],
                "status": row["status"],
                "diagnostics": row["diagnostics"],
                "diff": row["diff"],
            },
        )


_ROLES = frozenset({"user", "assistant", "tool"})
_CALL_FIELDS = frozenset({"call_id", "name", "arguments"})


def windowed(history: Sequence[ChatMessage], budget: int) -> list[ChatMessage]:
    """The newest messages of ``history`` whose texts fit ``budget`` UTF-8 bytes, starting at
    a user message: a conversation that lasts for days sends the model (and keeps) a bounded
    window, not every message since it began. The newest message is kept even if it alone is
    larger (a message is bounded by ``MAX_MESSAGE_CHARS``)."""
    size, start = 0, len(history)
    while start > 0:
        size += len(history[start - 1].text.encode("utf-8", "surrogatepass"))
        if size > budget and start < len(history):
            break
        start -= 1
    while start < len(history) - 1 and history[start].role != "user":
        start += 1
    return list(history[start:])


def history_from(messages: Any) -> list[ChatMessage]:
    """Rebuild ChatMessages from their stored dict form. ``ValueError`` says which message is
    not one (its position and what is wrong, never its text): a history edited in the store
    is refused, not half-read."""
    if not isinstance(messages, list):
        raise ValueError("the history is not a list of messages")
    out = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise ValueError(f"message {index} has no role user, assistant or tool")
        calls = m.get("tool_calls", [])
        if (
            not isinstance(m.get("text", ""), str)
            or not all(isinstance(m.get(k), str | None) for k in ("tool_call_id", "tool_name"))
            or not isinstance(calls, list)
            or not all(
                isinstance(c, dict)
                and set(c) == _CALL_FIELDS
                and all(isinstance(v, str) for v in c.values())
                for c in calls
            )
        ):
            raise ValueError(f"message {index} is not a chat message")
        out.append(
            ChatMessage(
                role=m["role"],
                text=m.get("text", ""),
                tool_calls=tuple(ToolCallRecord(**c) for c in calls),
                tool_call_id=m.get("tool_call_id"),
                tool_name=m.get("tool_name"),
            )
        )
    return out
