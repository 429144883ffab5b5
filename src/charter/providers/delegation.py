"""Handoffs in a chat: the delegation guard (the ChemSpace seed's ad-hoc tasks).

An agent that declares ``handoffs: [ROLE, …]`` in ``charter.yaml`` is offered one more tool in
a chat, :data:`HANDOFF_TOOL`. When the model calls it, the guard validates the handoff (its
shape, no histories or private reasoning at any depth, a receiver among the declared roles,
the budget, input artifacts registered in the chat's run), resolves the receiving role's
context in the same run (its own agent scope), and then — in one append — creates the ad-hoc
task (unless the model named one that exists and may start again), records the handoff with
the capabilities that context offers, and starts the task. The role then works the objective
in a turn of its own: the same provider, the role's instructions, **no chat history**, and
every tool call a governed kernel call made inside the task (its role, profile, capabilities
and budgets checked by the kernel: :func:`charter.kernel.task_auth.check_adhoc_task_call`).
What the role answered goes back to the coordinating model as the handoff tool's result.

Tasks started during a turn are completed when the turn ends — or failed, when the turn or
the role's own work failed or was cancelled. Tasks a previous process left running (its turn
was lost) are failed (``TURN_LOST``) when the conversation's next turn starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from charter.errors import Failure, InvalidInput
from charter.kernel.contexts import ResolvedContext
from charter.kernel.redaction import Redactor
from charter.ledger.events import NewEvent
from charter.ledger.ids import new_id
from charter.providers.base import ChatMessage, ToolInvocation, ToolOutcome, ToolSpec, TurnRequest
from charter.providers.events import MessageCompleted, ModelRequested, ProviderError, TextDelta
from charter.workflows.handoff import check_budget, scan

if TYPE_CHECKING:
    from charter.providers.orchestrator import ChatRequest, KernelInvoker, Orchestrator

logger = logging.getLogger("charter.chat")
HANDOFF_TOOL = "charter_handoff"
DEFAULT_BUDGET = {"max_tokens": 32_000, "max_tool_calls": 16, "timeout_seconds": 300}
BUDGET_CEILING = {"max_tokens": 1_000_000, "max_tool_calls": 64, "timeout_seconds": 3600}
FIELDS = frozenset(
    {
        "role",
        "objective",
        "task_id",
        "constraints",
        "acceptance_criteria",
        "input_artifact_ids",
        "budget",
    }
)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_REOPEN = frozenset({"pending", "failed", "input_required"})
MAX_ANSWER_CHARS = 16_000


def handoff_spec(roles: Sequence[str]) -> ToolSpec:
    """The handoff tool as the model sees it."""
    strings = {"type": "array", "items": {"type": "string", "maxLength": 500}, "maxItems": 20}
    return ToolSpec(
        name=HANDOFF_TOOL,
        description=(
            "Hand a self-contained piece of work to another role. It works the objective "
            "with its own tools and without this conversation's history, and answers with "
            "its result. Give everything it needs in the objective and constraints."
        ),
        parameters={
            "type": "object",
            "additionalProperties": False,
            "required": ["role", "objective"],
            "properties": {
                "role": {"type": "string", "enum": list(roles)},
                "objective": {"type": "string", "minLength": 1, "maxLength": 4000},
                "task_id": {"type": "string", "pattern": _TASK_ID.pattern},
                "constraints": strings,
                "acceptance_criteria": strings,
                "input_artifact_ids": {"type": "array", "items": {"type": "string"}},
                "budget": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {k: {"type": "integer", "minimum": 1} for k in DEFAULT_BUDGET},
                },
            },
        },
    )


def _bad(message: str, reason: str, **details: Any) -> InvalidInput:
    return InvalidInput(message, reason=reason, details=details or None)


def _strings(args: Mapping[str, Any], name: str) -> list[str]:
    value = args.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{name} must be a list of strings", "HANDOFF_INVALID", field=name)
    return value


def parse_handoff(arguments: str, roles: Sequence[str]) -> dict[str, Any]:
    """The model's handoff arguments, checked (pure). Raises ``InvalidInput``."""
    try:
        args = json.loads(arguments)
    except ValueError:
        raise _bad("the handoff arguments are not JSON", "HANDOFF_INVALID") from None
    if not isinstance(args, dict):
        raise _bad("the handoff arguments are an object", "HANDOFF_INVALID")
    scan(args)  # histories and private reasoning, at any depth
    unknown = sorted(set(args) - FIELDS)
    if unknown:
        raise _bad(
            f"the handoff has unknown fields {', '.join(unknown)}",
            "HANDOFF_UNKNOWN_FIELD",
            fields=unknown,
        )
    role = args.get("role")
    if not isinstance(role, str) or role not in roles:
        raise _bad(
            f"this agent hands off only to {', '.join(roles)}",
            "HANDOFF_WRONG_RECEIVER",
            expected=list(roles),
        )
    objective = args.get("objective")
    if not isinstance(objective, str) or not objective.strip() or len(objective) > 4000:
        raise _bad("objective must be a non-empty string", "HANDOFF_INVALID", field="objective")
    task_id = args.get("task_id")
    if task_id is not None and (not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id)):
        raise _bad(f"task_id must match {_TASK_ID.pattern}", "HANDOFF_INVALID", field="task_id")
    budget = check_budget({**DEFAULT_BUDGET, **(args.get("budget") or {})})
    over = sorted(k for k, v in budget.items() if v > BUDGET_CEILING[k])
    if over:
        raise _bad(
            f"budget over the ceiling: {', '.join(over)}",
            "HANDOFF_BUDGET_INVALID",
            ceiling=BUDGET_CEILING,
        )
    return {
        "role": role,
        "objective": objective,
        "task_id": task_id,
        "constraints": _strings(args, "constraints"),
        "acceptance_criteria": _strings(args, "acceptance_criteria"),
        "input_artifact_ids": _strings(args, "input_artifact_ids"),
        "budget": budget,
    }


@dataclass(slots=True, kw_only=True)
class Started:
    task_id: str
    role: str
    error: str | None = None


class Delegation:
    """One turn's handoffs: the guard, the roles' turns, and the end of their tasks."""

    def __init__(
        self,
        orchestrator: Orchestrator,
        request: ChatRequest,
        ctx: ResolvedContext,
        learned: set[str] | None = None,
    ) -> None:
        self.o = orchestrator
        self.request = request
        self.ctx = ctx
        # the secret argument values the turn's calls took (the orchestrator's set)
        self.learned: set[str] = learned if learned is not None else set()
        agent = orchestrator.runtime.build.agents.get(request.agent or "")
        self.roles: tuple[str, ...] = agent.handoffs if agent is not None else ()
        self.started: list[Started] = []

    def _redactor(self) -> Redactor:
        redactor = self.o.runtime.redactor
        return redactor.remember(self.learned) if self.learned else redactor

    @property
    def active(self) -> bool:
        return bool(self.roles)

    def spec(self) -> ToolSpec:
        return handoff_spec(self.roles)

    # -- the guard and the role's turn -----------------------------------------------------

    async def handoff(self, invoker: KernelInvoker, invocation: ToolInvocation) -> ToolOutcome:
        call_id = self.o.call_id(self.request, invocation.call_id)
        await invoker.emit("tool.started", {"callId": call_id, "tool": HANDOFF_TOOL})
        try:
            started, member_ctx, handoff = await self._start(invocation.arguments)
        except Failure as exc:
            error = {"code": exc.code.value, "reason": exc.reason, "message": str(exc)}
            content = json.dumps({"status": "rejected", "error": error})
            await self._result(
                invoker, call_id, "rejected", error, size=len(content.encode("utf-8"))
            )
            return ToolOutcome(status="rejected", content=content)
        await invoker.emit(
            "task.started",
            {
                "taskId": started.task_id,
                "role": started.role,
                "handoffId": handoff["handoff_id"],
                "tools": [t.name for t in member_ctx.tools],
            },
        )
        text = await self._work(invoker, started, member_ctx, handoff)
        status = "failed" if started.error else "succeeded"
        failed: dict[str, str] | None = None
        if started.error is not None:
            failed = {"code": "internal", "reason": started.error}
        body: dict[str, Any] = {"status": status, "task_id": started.task_id, "role": started.role}
        body["answer" if status == "succeeded" else "error"] = text or started.error
        content = json.dumps(body)
        await self._result(
            invoker,
            call_id,
            status,
            failed,
            task_id=started.task_id,
            size=len(content.encode("utf-8")),
        )
        return ToolOutcome(status=status, content=content, data=body)

    async def _result(
        self,
        invoker: KernelInvoker,
        call_id: str,
        status: str,
        error: Mapping[str, Any] | None,
        *,
        size: int,
        task_id: str | None = None,
    ) -> None:
        data: dict[str, Any] = {"callId": call_id, "tool": HANDOFF_TOOL, "status": status}
        data["error"] = dict(error) if error else None
        data["bytes"] = size
        if task_id is not None:
            data["taskId"] = task_id
        await invoker.emit("tool.result", data)
        payload: dict[str, Any] = {
            "turn_id": self.request.turn_id,
            "call_id": call_id,
            "tool": HANDOFF_TOOL,
            "status": status,
        }
        if task_id is not None:
            payload["task_id"] = task_id
        if error:
            payload["reason"] = error.get("reason")
        await self.o._record(self.ctx, "chat_tool_call", payload)

    async def _start(self, arguments: str) -> tuple[Started, ResolvedContext, dict[str, Any]]:
        """Validate, resolve the role's context, then create/hand off/start in one append."""
        runtime = self.o.runtime
        args = parse_handoff(arguments, self.roles)
        run_id = self.ctx.run_id
        known = {a.artifact_id for a in await runtime.artifact_rows(run_id)}
        strangers = [a for a in args["input_artifact_ids"] if a not in known]
        if strangers:
            raise _bad(
                "an input artifact is not registered in this chat's run",
                "HANDOFF_INPUT_UNKNOWN",
                artifact_ids=strangers,
            )
        for aid in args["input_artifact_ids"]:
            await runtime.artifacts.verify(run_id, aid)
        role = args["role"]
        task_id = args["task_id"] or f"{_SAFE.sub('_', role)[:40]}-{secrets.token_hex(6)}"
        existing = {t.task_id: t for t in await runtime.tasks(run_id)}.get(task_id)
        if existing is not None:
            if existing.role != role:
                raise _bad(
                    f"task {task_id} is for role {existing.role}",
                    "HANDOFF_WRONG_RECEIVER",
                    expected=existing.role,
                )
            if existing.status not in _REOPEN:
                reason = "TASK_RUNNING" if existing.status == "running" else "TASK_TERMINAL"
                raise _bad(f"task {task_id} is {existing.status}", reason)
        member_ctx = await runtime.resolve_context(
            self.request.principal,
            self.ctx.profile,
            agent=role,
            run_id=run_id,
        )
        handoff_id = new_id("handoff")
        # model-written text: recorded redacted (the deployment's secrets and patterns, and
        # the secret argument values the turn's calls took)
        redact = self._redactor().redact
        handoff = {
            "task_id": task_id,
            "handoff_id": handoff_id,
            "objective": redact(args["objective"]),
            "sender_role": self.request.agent or "chat",
            "receiver_role": role,
            "constraints": redact(args["constraints"]),
            "acceptance_criteria": redact(args["acceptance_criteria"]),
            "input_artifact_ids": args["input_artifact_ids"],
            "expected_outputs": [],
            "capabilities": sorted(t.id for t in member_ctx.tools),
            "budget": args["budget"],
            "notes": f"chat {self.request.conversation_id} turn {self.request.turn_id}",
        }
        events = []
        if existing is None:
            events.append(
                NewEvent(
                    type="task_created",
                    payload={
                        "task_id": task_id,
                        "role": role,
                        "profile": self.ctx.profile,
                        "title": f"handoff to {role}",
                        "depends_on": [],
                    },
                )
            )
        events.append(NewEvent(type="handoff_recorded", payload=handoff))
        events.append(
            NewEvent(
                type="task_status_changed",
                payload={"task_id": task_id, "status": "running", "handoff_id": handoff_id},
            )
        )
        await runtime.record(run_id, events)
        started = Started(task_id=task_id, role=role)
        self.started.append(started)
        return started, member_ctx, handoff

    async def _work(
        self,
        invoker: KernelInvoker,
        started: Started,
        member_ctx: ResolvedContext,
        handoff: Mapping[str, Any],
    ) -> str:
        """The role's own turn: no history, its instructions, calls inside its task."""
        provider = self.o.provider
        assert provider is not None
        role_agent = self.o.runtime.build.agents[started.role]
        brief = {
            k: handoff[k]
            for k in ("objective", "constraints", "acceptance_criteria", "input_artifact_ids")
        }
        instructions = "\n\n".join(
            p
            for p in (
                role_agent.instructions,
                f"You are the {started.role} role, working one delegated task "
                f"({started.task_id}). The handoff:\n" + json.dumps(brief, indent=2),
            )
            if p
        )
        member = invoker.for_task(member_ctx, started.task_id)
        turn = TurnRequest(
            conversation_id=self.request.conversation_id,
            instructions=instructions,
            messages=[ChatMessage(role="user", text=str(handoff["objective"]))],
            tools=self.o.tool_specs(member_ctx),
            max_rounds=min(
                self.o.settings.max_rounds, int(handoff["budget"]["max_tool_calls"]) + 1
            ),
        )
        said: list[str] = []
        done: list[str] = []
        try:
            # the handoff's time budget bounds the role's whole turn (a call it interrupts
            # still ends with its outcome written: the kernel shields it)
            async with asyncio.timeout(int(handoff["budget"]["timeout_seconds"])):
                async for event in provider.execute_turn(turn, member):
                    if isinstance(event, TextDelta):
                        said.append(event.text)
                    elif isinstance(event, MessageCompleted):
                        done.append(event.text)
                        said = []
                    elif isinstance(event, ModelRequested):
                        await self.o.disclose(member_ctx, self.request, event, [])
                    elif isinstance(event, ProviderError):
                        logger.warning("handoff %s: provider error %s", started.task_id, event.kind)
                        started.error = f"PROVIDER_{event.kind}"
        except TimeoutError:
            started.error = "TASK_TIMEOUT"
        except Failure as exc:
            started.error = exc.reason
        except Exception as exc:  # the provider's own failure: the task fails, logged
            logger.warning("handoff %s failed: %s", started.task_id, type(exc).__name__)
            started.error = f"PROVIDER_{type(exc).__name__}"
        text = "\n".join([*done, "".join(said)]).strip()
        safe: str = self._redactor().redact(text)
        return safe[:MAX_ANSWER_CHARS]

    # -- the end of the turn ---------------------------------------------------------------

    async def end_turn(self, status: str) -> list[tuple[str, str]]:
        """Complete the turn's running tasks (fail them if the turn or their work failed);
        the (task id, status) pairs that were ended."""
        ended: list[tuple[str, str]] = []
        rows = {t.task_id: t for t in await self.o.runtime.tasks(self.ctx.run_id)}
        for s in self.started:
            row = rows.get(s.task_id)
            if row is None or row.status != "running":
                continue
            reason = s.error or (None if status == "completed" else f"TURN_{status.upper()}")
            if await end_task(self.o, self.ctx, s.task_id, reason):
                ended.append((s.task_id, "failed" if reason else "completed"))
        return ended


async def end_task(o: Orchestrator, ctx: ResolvedContext, task_id: str, reason: str | None) -> bool:
    """Complete (``reason`` None) or fail a task of the chat's run; False if the ledger
    refused (logged: the turn still ends)."""
    payload: dict[str, Any] = {"task_id": task_id, "status": "completed"}
    if reason is not None:
        payload = {
            "task_id": task_id,
            "status": "failed",
            "error": {
                "code": "internal",
                "message": "the chat turn that ran this task ended with " + reason,
                "retryable": True,
                "details": {"reason": reason},
            },
        }
    try:
        await o.runtime.record(ctx.run_id, [NewEvent(type="task_status_changed", payload=payload)])
    except Failure as exc:
        logger.warning("could not end task %s: %s", task_id, exc.reason)
        return False
    return True


async def fail_lost_tasks(o: Orchestrator, ctx: ResolvedContext) -> list[str]:
    """Tasks left running by a turn that was lost with its process: failed, ``TURN_LOST``.
    (A conversation runs one turn at a time, so a running task at a turn's start is lost.)"""
    lost = [t.task_id for t in await o.runtime.tasks(ctx.run_id) if t.status == "running"]
    return [tid for tid in lost if await end_task(o, ctx, tid, "TURN_LOST")]
