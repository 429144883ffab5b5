"""The transport-neutral part of ``charter mcp``: one profile's tools, governed.

A :class:`Gateway` answers ``tools/list`` and ``tools/call`` for a principal within an
:class:`McpSession`. Every call goes through the kernel (``Runtime.call``) in the session's
ad-hoc ``mcp-session`` run, which is created lazily on the session's first request and
reused for the session; the session's context is re-resolved in the same run when it
expires (over stateless HTTP, where the session lives as long as the process, in a new run).

Call ids. A client may pass an ``idempotency_key`` argument (it is not in the schema shown to
the model and is removed before the kernel sees the arguments, unless the tool's own schema
declares a property of that name). It becomes the kernel's call id, and the session remembers
which context first saw it, so a retried request with the same key — the identical retry after
an approval included — reaches the same ``(context, call id)`` and never dispatches twice.
Once that context has expired (or, after a redeploy, belongs to another Build), a key that
reserved nothing in it is free again (it goes on in the current context); a call there still
waiting for its approval keeps the key, never runs, and its retry says to call again with a
new key.
Without a key the call id is derived from the session and the JSON-RPC request id
(``mcp-<session>-<request id>``) over stdio, and is random per request over stateless HTTP
(where request ids repeat across connections).

Tasks. A call into a run of a catalog workflow names one of its running tasks. A gateway can
be bound to such a run (``charter mcp --run RUN [--task TASK]``, stdio): its context is
resolved in that run (for the task's role as agent, unless ``--agent`` says otherwise) and
never renewed into another run, and every call carries the bound task — or the task a call
names in its request ``_meta`` (``{"charter/task_id": TASK}``), which wins. The kernel then
applies the task's rules (role, profile, allowlist, handoff, budgets) as on every surface.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

try:
    import mcp as _mcp_sdk  # noqa: F401 (the optional dependency, checked once here)
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("Charter's MCP support needs the mcp extra: pip install -e '.[mcp]'") from exc
import anyio
import mcp_types as types

from charter.contracts.model import ToolContract
from charter.contracts.text import shown
from charter.errors import Failure, InvalidInput, TransientExternal
from charter.kernel.admission import CALL_ID
from charter.kernel.contexts import ResolvedContext, tool_schemas
from charter.kernel.core import _parse_at
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.mcp._cut import Cut
from charter.mcp._results import envelope_result, failure_result
from charter.runtime import Runtime

MCP_SESSION_SLUG = "mcp-session"
_RENEW = frozenset({"RUN_ENDED", "RUN_TIME_BUDGET_EXCEEDED", "RUN_CALL_BUDGET_EXCEEDED"})
IDEMPOTENCY_KEY = "idempotency_key"
TASK_META = "charter/task_id"
_CLOSED = {  # the kernel's reasons for a context that takes no new call, and what they mean
    "CONTEXT_EXPIRED": "has expired",
    "CONTEXT_BUILD_CHANGED": "was resolved under another Build (the project was redeployed)",
}
_DIGITS = re.compile(r"-?[0-9]+")
_KEYS_KEPT = 10_000  # idempotency keys a session maps without asking the store
# Calls with one idempotency key looked at: the tenant's, every principal's (the calls table
# indexes no actor), so a common key ("1", "retry") may match many calls of others.
_KEY_SCAN = 10_000
NETWORK_EXECUTORS = frozenset({"http", "mcp"})
"""Executor kinds that reach over the network: their tools are always advertised open-world."""


@dataclass(kw_only=True)
class McpSession:
    """What one MCP session keeps: its run, its current context and the keys it has seen."""

    tag: str = field(default_factory=lambda: secrets.token_hex(6))
    # stdio: one connection, so JSON-RPC request ids are unique in the session. Stateless HTTP:
    # every request is its own connection and ids repeat, so derived call ids are random.
    request_ids_unique: bool = True
    run_id: str | None = None
    context: ResolvedContext | None = None
    # ``context`` as last checked, with its expiry parsed once instead of on every call
    live: tuple[ResolvedContext, datetime] | None = None
    key_contexts: dict[str, str] = field(default_factory=dict)
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class Gateway:
    """One profile of one runtime, served over MCP."""

    def __init__(
        self,
        runtime: Runtime,
        profile: str,
        *,
        run_id: str | None = None,
        task_id: str | None = None,
        agent: str | None = None,
    ) -> None:
        if profile not in runtime.build.profiles:
            known = ", ".join(sorted(runtime.build.profiles)) or "(none)"
            raise InvalidInput(
                f"unknown profile {shown(profile)} (known: {known})", reason="PROFILE_UNKNOWN"
            )
        self.runtime = runtime
        self.profile = profile
        self.run_id = run_id  # bound to a catalog run: contexts are resolved in it
        self.task_id = task_id  # ... and calls carry this task unless _meta names one
        self.agent = agent

    # -----------------------------------------------------------------------------------
    # the session's context

    async def context(self, principal: Principal, session: McpSession) -> ResolvedContext:
        """The session's live context, resolving it (and the session's run) when needed."""
        live = session.live
        if live is not None and live[0] is session.context and self.runtime.clock() < live[1]:
            return live[0]  # the common case: no lock (taking it yields to the event loop)
        async with session.lock:
            ctx = session.context
            if ctx is None or self.runtime.clock() >= _parse_at(ctx.expires_at):
                ctx = session.context = await self._resolve(principal, session)
                session.run_id = ctx.run_id
            session.live = (ctx, _parse_at(ctx.expires_at))
            return ctx

    async def _resolve(self, principal: Principal, session: McpSession) -> ResolvedContext:
        """A new context for the session (its current one is missing or expired)."""
        if self.run_id is not None:  # bound to a run: a new context in the same run
            return await self.runtime.resolve_context(
                principal, self.profile, agent=self.agent, run_id=self.run_id
            )
        if session.context is not None and not session.request_ids_unique:
            # Stateless HTTP: the "session" is the principal's for the process's lifetime,
            # so each context lifetime gets a run of its own instead of one run growing
            # forever (keyed retries still find their call through the store).
            session.run_id, session.tag = None, secrets.token_hex(6)
        return await self.runtime.resolve_context(
            principal,
            self.profile,
            run_id=session.run_id,
            session_id=f"mcp-{session.tag}",
            workflow_slug=MCP_SESSION_SLUG,
            session=True,  # an ended or spent run gives way to a fresh one
        )

    # -----------------------------------------------------------------------------------
    # tools/list

    async def check_ready(self) -> None:
        """Raise ``TOOL_NOT_READY`` if a required tool of the profile is not ready (before
        serving)."""
        report = await self.runtime.readiness(fresh=True)
        profile = {c.id for c in self.runtime.build.profile_tools(self.profile)}
        bad = [t for t in report.not_ready() if t.required and t.tool_id in profile]
        if bad:
            raise TransientExternal(
                "required tools of profile "
                f"{self.profile!r} are not ready: "
                + "; ".join(f"{t.tool_id}: {t.reason} ({t.message})" for t in bad),
                reason="TOOL_NOT_READY",
                details={"tools": [t.to_dict() for t in bad]},
            )

    async def list_tools(self, principal: Principal, session: McpSession) -> list[types.Tool]:
        ctx = await self.context(principal, session)
        contracts = [self.runtime.build.tools[t.id].contract for t in ctx.tools]
        entries = tool_schemas(contracts, "mcp")
        return [self._tool(c, e) for c, e in zip(contracts, entries, strict=True)]

    def _tool(self, contract: ToolContract, entry: dict[str, Any]) -> types.Tool:
        binding = self.runtime.deployment.binding_for(contract.id)
        if binding is not None and binding.executor in NETWORK_EXECUTORS:
            entry["annotations"]["openWorldHint"] = True
        output = entry.get("outputSchema")
        if output is not None and output.get("type") != "object":
            # MCP clients before 2026-07-28 accept only object output schemas.
            del entry["outputSchema"]
        return types.Tool.model_validate(entry)

    # -----------------------------------------------------------------------------------
    # tools/call

    async def call_tool(
        self,
        principal: Principal,
        session: McpSession,
        name: str,
        arguments: Mapping[str, Any] | None,
        request_id: str | int | None,
        meta: Mapping[str, Any] | None = None,
        *,
        raw: str | None = None,
        cut: Cut | None = None,
    ) -> types.CallToolResult:
        """Call ``name`` through the kernel. ``raw``: the arguments as the client wrote them,
        when the transport found a repeated key or a lone surrogate in them — the kernel
        refuses them and records it (``arguments`` then holds at most the idempotency key).
        ``cut``: the request's, when a stopping server may cut the call off (HTTP) — the
        answer is then the envelope the kernel recorded (:mod:`charter.mcp._cut`)."""
        args = dict(arguments or {})
        task_id = self.task_id
        named = (meta or {}).get(TASK_META)
        if named is not None:
            if not isinstance(named, str):
                bad = InvalidInput(f"_meta {TASK_META} must be a string", reason="TASK_ID_INVALID")
                return failure_result(bad, name=name)
            task_id = named
        try:
            ctx = await self.context(principal, session)
        except Failure as exc:  # e.g. a required tool is no longer ready: TOOL_NOT_READY
            return failure_result(exc, name=name)
        try:
            key = self._take_key(ctx, name, args)
        except InvalidInput as exc:
            return failure_result(exc, name=name)
        if key is None:
            if session.request_ids_unique and request_id is not None:
                call_id = _derived(session.tag, request_id)
            else:
                call_id = f"mcp-{session.tag}-{secrets.token_hex(8)}"
            context_id = ctx.context_id
        else:
            call_id = key
            try:
                context_id = session.key_contexts.get(key) or await self._keyed_context(
                    principal, key, ctx.context_id
                )
            except Failure as exc:  # IDEMPOTENCY_KEY_AMBIGUOUS
                return failure_result(exc, name=name)
            session.key_contexts[key] = context_id
            if len(session.key_contexts) > _KEYS_KEPT:  # the store remembers the rest
                del session.key_contexts[next(iter(session.key_contexts))]
        given: str | dict[str, Any] = raw if raw is not None else args
        env = await _cut(
            cut, self.runtime.call(context_id, name, call_id, given, as_=principal, task_id=task_id)
        )
        for _ in range(2):
            # The key's context expired (the session's own context was renewed meanwhile), or
            # was resolved under another Build (a keyed retry reaching a redeployed replica).
            # A key that reserved nothing there — its call was rejected or denied before
            # reserving — is free: it goes on where the store has a call of it, else in the
            # current context. A call waiting for its approval keeps the key, and says so.
            if key is None or context_id == ctx.context_id or not _closed(env):
                break
            state = await self._state_in(principal, context_id, key)
            if state is not None:
                if state == CallStatus.PENDING_APPROVAL.value:
                    return _stuck(env, name=name, call_id=call_id)
                break
            session.key_contexts.pop(key, None)
            context_id = await self._keyed_context(principal, key, ctx.context_id)
            session.key_contexts[key] = context_id
            env = await _cut(
                cut,
                self.runtime.call(context_id, name, call_id, given, as_=principal, task_id=task_id),
            )
        renew = key is None and self.run_id is None  # a bound run is never swapped
        if renew and env.error is not None and env.error.get("reason") in _RENEW:
            # The session's run ended (idle, or by an operator) or spent its budgets: the
            # session goes on in a fresh run (charter.kernel.sessions), once.
            session.context = None
            try:
                ctx = await self.context(principal, session)
            except Failure as exc:
                return failure_result(exc, name=name)
            if ctx.run_id != env.run_id:
                calling = self.runtime.call(ctx.context_id, name, call_id, given, as_=principal)
                env = await _cut(cut, calling)
        return envelope_result(env, name=name, call_id=call_id, keyed=key is not None)

    async def _keyed_context(self, principal: Principal, key: str, current: str) -> str:
        """The context that first saw ``key`` for this principal in this profile — in any
        session, process or replica, from the store's calls — else ``current``.

        A retry after a reconnect, a restart of ``charter mcp`` or through another replica so
        reaches the same ``(context, call id)``: the kernel answers with the recorded outcome
        (or refuses different arguments) instead of dispatching again.

        The store is asked for every call of the tenant with this id (its order is a position
        within each run, not across runs, so the principal's call may come last). When more
        share it than :data:`_KEY_SCAN`, none of them the principal's in this profile, the call
        is refused (``IDEMPOTENCY_KEY_AMBIGUOUS``) rather than risk running a retry again.
        """
        calls = await self.runtime.calls(tenant=principal.tenant, call_id=key, limit=_KEY_SCAN)
        for call in calls:
            if call.actor != principal.name:
                continue
            ctx = await self.runtime.context_record(call.run_id, call.context_id)
            if ctx is not None and ctx.profile == self.profile:
                return call.context_id
        if len(calls) >= _KEY_SCAN:
            raise InvalidInput(
                f"at least {_KEY_SCAN} calls of this tenant use this idempotency key and "
                "none of those read is yours in this profile, so whether this retry already "
                "ran cannot be told: use a key of your own (a UUID)",
                reason="IDEMPOTENCY_KEY_AMBIGUOUS",
                details={"field": IDEMPOTENCY_KEY},
            )
        return current

    async def _state_in(self, principal: Principal, context_id: str, key: str) -> str | None:
        """The state of ``principal``'s call ``key`` in ``context_id``; None: none reserved."""
        calls = await self.runtime.calls(tenant=principal.tenant, call_id=key, limit=_KEY_SCAN)
        found = (c for c in calls if c.context_id == context_id and c.actor == principal.name)
        return next((c.state for c in found), None)

    def _take_key(self, ctx: ResolvedContext, name: str, args: dict[str, Any]) -> str | None:
        """Remove and return the ``idempotency_key`` argument (unless the tool declares it).

        Only a tool the context offers is looked at: a tool of another profile answers as a
        name nothing has, whatever its schema (nothing about it is disclosed)."""
        if IDEMPOTENCY_KEY not in args:
            return None
        offered = ctx.offered(name)
        bound = self.runtime.build.tools.get(offered.id) if offered is not None else None
        declared = bound.contract.args_schema.get("properties", {}) if bound is not None else {}
        if IDEMPOTENCY_KEY in declared:
            return None
        value = args.pop(IDEMPOTENCY_KEY)
        if value is not None and not isinstance(value, str):
            # a number or an object would become some other call's id: refused, not coerced
            raise InvalidInput(
                f"the argument {IDEMPOTENCY_KEY} must be a string (the call's id), "
                f"not {_json_type(value)}",
                reason="IDEMPOTENCY_KEY_INVALID",
                details={"field": IDEMPOTENCY_KEY},
            )
        if value is not None and CALL_ID.fullmatch(value) is None:
            # refused here, as a wrong type is: never echoed, nor recorded as a call id (a
            # client could otherwise write megabytes into the ledger with every request)
            raise InvalidInput(
                f"the argument {IDEMPOTENCY_KEY} must match {CALL_ID.pattern} (at most 128 "
                f"characters; a UUID will do), not a string of {len(value)} characters that "
                "does not",
                reason="IDEMPOTENCY_KEY_INVALID",
                details={"field": IDEMPOTENCY_KEY},
            )
        return value


def _cut(cut: Cut | None, calling: Awaitable[Envelope]) -> Awaitable[Envelope]:
    """``calling`` (a kernel call) as ``cut`` may cut it off, if there is one."""
    return calling if cut is None else cut.call(calling)


def _derived(tag: str, request_id: str | int) -> str:
    """The call id of an unkeyed request: ``mcp-<session>-<request id>``, or — for a request
    id that cannot be part of a call id (too long, or characters such as ``/`` or spaces,
    valid JSON-RPC all the same), and for a string of digits (``"7"`` is another id than
    ``7``) — ``mcp-<session>-h<its hash>``, so the same request id still names the same call
    and two ids never name one."""
    call_id = f"mcp-{tag}-{request_id}"
    if CALL_ID.fullmatch(call_id) and not (
        isinstance(request_id, str) and _DIGITS.fullmatch(request_id)
    ):
        return call_id
    digest = hashlib.sha256(json.dumps(request_id).encode()).hexdigest()[:32]
    return f"mcp-{tag}-h{digest}"


def _closed(env: Envelope) -> bool:
    """The kernel refused the call because its context is closed: expired, or resolved
    under another Build (a redeploy). A retryable refusal is not one: the context's Build is
    the current one and this runtime's is not (a rolling deploy), so the context is open on
    the runtimes that run it, and its key stays there."""
    error = env.error or {}
    return (
        env.status is CallStatus.DENIED
        and error.get("reason") in _CLOSED
        and error.get("retryable") is not True
    )


def _stuck(env: Envelope, *, name: str, call_id: str) -> types.CallToolResult:
    """A keyed call whose context closed with the call unfinished in it (an approval asked,
    never used): nothing ran, and the key stays bound to that call, so say what to do."""
    error = dict(env.error or {})
    why = _CLOSED.get(str(error.get("reason")), "has closed")
    error["message"] = (
        f"the context this idempotency key's call was made in {why} before the call ran "
        f"(nothing ran; an approval asked for it can no longer be used); the key "
        f"{call_id!r} stays bound to that call: call again with a new idempotency_key "
        "(a write asks for a new approval)"
    )
    return envelope_result(replace(env, error=error), name=name, call_id=call_id, keyed=True)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"
