"""Downstream MCP servers as executors, their tools pinned by digest (DESIGN §1.4).

A binding names an MCP server — a stdio command, or a streamable-HTTP URL with a credential —
and the contract's ``upstream`` names the server's tool and pins a digest over its name,
description and input schema (:func:`upstream_digest`). A changed description is how tool
poisoning and "rug pulls" happen, so:

- :meth:`McpExecutor.readiness` lists the server's tools (on the kept session) and reports
  every pinned tool whose digest no longer matches, naming what changed;
- :class:`McpExecutor` lists the tools again before every call and refuses a drifted or
  missing tool before dispatch (``contract_violation`` / ``TOOL_NOT_READY``, nothing sent).

Outcomes: an answer with ``isError`` → ``failed`` (the server reported it);
a JSON-RPC error after the call was sent → ``unknown`` for a write (``failed`` for a read),
unless its code proves the call never ran (``-32700``, ``-32600``, ``-32601``: ``failed``, not
dispatched); the server unreachable before the call was sent → ``failed``,
not dispatched (``EXECUTOR_UNREACHABLE``); the deadline passing or the connection breaking
after the call was sent → ``unknown``.

Connections are kept: each downstream server has one live session (a stdio server is started
once), shared by every call and opened again after it breaks, times out or is closed
(:class:`McpExecutor.aclose`). The tool listing is still fetched before every call, on that
session, so drift is caught at the call that would have been sent.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import mcp as _mcp_sdk  # noqa: F401 (the optional dependency, checked once here)
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("Charter's MCP support needs the mcp extra: pip install -e '.[mcp]'") from exc
import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

from charter.contracts.canonical import sha256_digest
from charter.contracts.model import ToolContract
from charter.errors import (
    ContractViolation,
    Failure,
    PermissionDenied,
    TransientExternal,
    UserError,
)
from charter.executors.egress import (
    EgressPolicy,
    Resolver,
    allowed_address,
    connect_failure,
    pinned_client,
    system_resolver,
)
from charter.kernel.executor_port import (
    TIMEOUT,
    ExecutionOutcome,
    ExecutionRequest,
    MessageRedactor,
    ensure_json,
    failed,
    failure_from,
    in_doubt,
    succeeded,
    unknown,
)

TOOL_NOT_READY = "TOOL_NOT_READY"
EXECUTOR_UNREACHABLE = "EXECUTOR_UNREACHABLE"
EXECUTOR_REFUSED = "EXECUTOR_REFUSED"  # the server refused the binding's credential
UPSTREAM_TOOL_ERROR = "UPSTREAM_TOOL_ERROR"
UPSTREAM_PROTOCOL_ERROR = "UPSTREAM_PROTOCOL_ERROR"  # a JSON-RPC error after the call was sent
UPSTREAM_REFUSED = "UPSTREAM_REFUSED"  # a JSON-RPC error proving the call never ran
# JSON-RPC errors that prove a tools/call was never taken up (so its tool never ran)
NOTHING_RAN = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND})
CONNECTION_LOST = "EXECUTOR_CONNECTION_LOST"
LIST_TIMEOUT_S = 20.0
CA_HINT = "a server behind a private CA needs the binding's `ca`"  # after a certificate failure


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerSpec:
    """How to reach one MCP server: ``command`` (stdio) or ``url`` (streamable HTTP)."""

    command: tuple[str, ...] | None = None
    url: str | None = None
    credential: bytes | None = field(default=None, repr=False)  # bearer token for ``url``
    credential_env: str | None = None  # or: read the bearer token from this variable
    cwd: Path | None = None
    env: Mapping[str, str] | None = None  # extra environment for a stdio server
    # an https ``url``: the PEM certificates alone trusted for its TLS (a private CA)
    ca: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise UserError("an MCP server is either a command (stdio) or a url, not both")
        if self.command is not None and not self.command:
            raise UserError("an MCP server command cannot be empty")
        if self.ca is not None and not (self.url or "").startswith("https://"):
            raise UserError("a CA applies to https:// MCP server urls only")

    def verify(self) -> ssl.SSLContext | bool:
        """How a ``url`` server's certificate is checked: against ``ca`` alone when given,
        else against the system's trust store."""
        return ssl.create_default_context(cadata=self.ca) if self.ca is not None else True

    @property
    def label(self) -> str:
        return self.url if self.url is not None else " ".join(self.command or ())

    def bearer(self) -> bytes | None:
        if self.credential is not None:
            return self.credential
        if self.credential_env is not None:
            value = os.environ.get(self.credential_env)
            if value is None:
                raise UserError(f"environment variable {self.credential_env} is not set")
            return value.encode()
        return None


@asynccontextmanager
async def connect(spec: McpServerSpec, *, address: str | None = None) -> AsyncIterator[Client]:
    """An initialized SDK client for ``spec`` (no response cache: listings are always fresh);
    a ``url`` server's requests go to ``address`` when given (pinned, the name kept)."""
    if spec.command is not None:
        env = {**os.environ, **spec.env} if spec.env is not None else None
        params = StdioServerParameters(
            command=spec.command[0],
            args=list(spec.command[1:]),
            cwd=spec.cwd,
            env=env,
        )
        async with Client(params, cache=None) as client:
            client.session.validate_tool_result = _kernel_judges  # type: ignore[method-assign]
            yield client
        return
    assert spec.url is not None
    token = spec.bearer()
    headers = {"Authorization": f"Bearer {token.decode()}"} if token is not None else {}
    if address is not None:
        pinned, url = pinned_client(spec.url, address, headers=headers, verify=spec.verify())
    else:
        pinned = httpx2.AsyncClient(headers=headers, trust_env=False, verify=spec.verify())
        url = spec.url
    refusals: list[int] = []  # HTTP statuses >= 400 the server answered while connecting

    async def note(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refusals.append(response.status_code)

    pinned.event_hooks["response"].append(note)
    try:
        async with (
            pinned as http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            refusals.clear()  # connected: later answers belong to the calls
            client.session.validate_tool_result = _kernel_judges  # type: ignore[method-assign]
            yield client
    except Exception as exc:
        if refusals:  # the SDK keeps only "Server returned an error response": say the status
            raise HttpRefused(refusals[-1]) from exc
        raise


class HttpRefused(Exception):
    """A ``url`` server answered an HTTP error status while the session was being opened."""

    def __init__(self, status: int) -> None:
        self.status = status
        credential = " (check the binding's credential)" if status in (401, 403) else ""
        super().__init__(f"the server answered HTTP {status}{credential}")


async def _kernel_judges(name: str, result: types.CallToolResult) -> None:
    """In place of the SDK client's check of a tool's result against the output schema its
    server lists: that check raises after the tool ran, which cannot be told from a broken
    connection. The kernel checks the result against the contract's pinned ``result_schema``
    instead (``RESULT_SCHEMA_MISMATCH``: ``failed`` for a read, ``unknown`` otherwise)."""


class _Session:
    """One downstream server's live connection, shared by calls from any task.

    The SDK's client must be entered and left in one task, so a task of its own holds it open
    until :meth:`close`; if the connection fails or breaks, the task ends and the session is
    no longer :attr:`alive` (the pool then opens a new one).
    """

    def __init__(self, spec: McpServerSpec, address: str | None = None) -> None:
        self.spec = spec
        self.address = address  # a url server's pinned address
        self._client: Client | None = None
        self._failure: Exception | None = None
        self.used = False  # set once a call has run on it
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self._task = self.loop.create_task(
            self._hold(), name=f"charter-mcp-downstream {spec.label}"
        )

    async def _hold(self) -> None:
        try:
            async with connect(self.spec, address=self.address) as client:
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # translated by the caller, like a failed connect
            self._failure = exc
        finally:
            self._client = None
            self._ready.set()

    @property
    def alive(self) -> bool:
        return not self._task.done() and not self._stop.is_set()

    async def client(self) -> Client:
        """The connected client (waiting for the connection); raises why it is not there."""
        await self._ready.wait()
        if self._client is None:
            raise self._failure or ConnectionError("the MCP session is closed")
        return self._client

    async def close(self) -> None:
        self._stop.set()
        await asyncio.wait([self._task])  # its end, however it ended (never re-raised here)


_STALE = object()  # an attempt on a kept session that turned out dead, nothing sent


def _session_key(spec: McpServerSpec) -> tuple[Any, ...]:
    env = tuple(sorted(spec.env.items())) if spec.env is not None else None
    return (spec.command, spec.url, spec.cwd, env, spec.credential, spec.credential_env, spec.ca)


def upstream_digest(tool: types.Tool) -> str:
    """``sha256:`` over the canonical JSON of the tool's name, description and input schema."""
    return sha256_digest(
        {"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema}
    )


async def list_upstream(spec: McpServerSpec, *, hint: str = CA_HINT) -> list[types.Tool]:
    """Every tool the server lists (all pages); ``hint`` follows a certificate failure."""
    try:
        with anyio.fail_after(LIST_TIMEOUT_S):
            async with connect(spec) as client:
                return await _all_tools(client)
    except Failure:
        raise
    except TimeoutError:
        raise TransientExternal(
            f"the MCP server {spec.label} did not list its tools within {LIST_TIMEOUT_S:g} s",
            reason=EXECUTOR_UNREACHABLE,
        ) from None
    except Exception as exc:  # any transport or protocol failure: translated here
        raise _not_reached(spec, exc, hint=hint) from None


async def _all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


# ---------------------------------------------------------------------------------------
# readiness


@dataclass(frozen=True, slots=True, kw_only=True)
class Drift:
    """One pinned tool that no longer matches what its server lists."""

    tool_id: str
    upstream: str
    status: str  # "changed" | "missing"
    changed: tuple[str, ...] = ()  # of "name", "description", "inputSchema"
    pinned: str = ""
    current: str | None = None

    def describe(self) -> str:
        if self.status == "missing":
            return f"{self.tool_id}: the server no longer lists {self.upstream!r}"
        what = ", ".join(self.changed) or "the pinned digest"
        return f"{self.tool_id}: {self.upstream!r} changed ({what}): {self.pinned} → {self.current}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool_id,
            "upstream": self.upstream,
            "status": self.status,
            "changed": list(self.changed),
            "pinned": self.pinned,
            "current": self.current,
        }


def compare(contract: ToolContract, listed: Sequence[types.Tool]) -> Drift | None:
    """``None`` if the server lists the contract's upstream tool with the pinned digest."""
    up = contract.upstream
    if up is None:
        return None
    found = next((t for t in listed if t.name == up.name), None)
    if found is None:
        return Drift(tool_id=contract.id, upstream=up.name, status="missing", pinned=up.digest)
    current = upstream_digest(found)
    if current == up.digest:
        return None
    changed = []
    if (found.description or "") != contract.description:
        changed.append("description")
    if found.input_schema != contract.args_schema:
        changed.append("inputSchema")
    return Drift(
        tool_id=contract.id,
        upstream=up.name,
        status="changed",
        changed=tuple(changed),
        pinned=up.digest,
        current=current,
    )


# ---------------------------------------------------------------------------------------
# the executor


class McpExecutor:
    """Runs calls on downstream MCP servers; one instance serves every ``mcp`` binding."""

    kind = "mcp"

    def __init__(
        self,
        *,
        servers: Mapping[str, McpServerSpec],
        redact_message: MessageRedactor,
        egress: EgressPolicy | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self._servers = dict(servers)  # tool id -> server
        self._redact = redact_message
        # a url server's host is resolved when its session opens and checked against the
        # deployment's egress policy; the session then keeps that address
        self.egress = egress if egress is not None else EgressPolicy()
        self.resolver: Resolver = resolver or system_resolver
        self._sessions: dict[tuple[Any, ...], _Session] = {}
        # Told the tool id of a pinned tool found drifted at call time, so readiness checks
        # again before the next call's intent.
        self.on_mismatch: Any = None

    @property
    def servers(self) -> Mapping[str, McpServerSpec]:
        return self._servers

    async def aclose(self) -> None:
        """Close every kept session (stdio servers exit)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()

    async def _session(self, spec: McpServerSpec, *, within: float) -> _Session:
        """The kept session, or a new one (a url server's address resolved — within
        ``within`` seconds — and allowed first: raises ``EGRESS_REFUSED`` /
        ``EXECUTOR_UNREACHABLE`` before connecting)."""
        key = _session_key(spec)
        session = self._sessions.get(key)
        if session is None or not session.alive or session.loop is not asyncio.get_running_loop():
            address = None
            if spec.url is not None:
                try:
                    with anyio.fail_after(within):  # a DNS server that stopped answering
                        address = await allowed_address(spec.url, self.egress, self.resolver)
                except TimeoutError:
                    raise TransientExternal(
                        f"the MCP server {spec.label} is unreachable: its host name did not "
                        f"resolve within {within:g} s",
                        reason=EXECUTOR_UNREACHABLE,
                    ) from None
            session = self._sessions[key] = _Session(spec, address)
        return session

    async def _discard(self, session: _Session) -> None:
        """Drop a session whose state is in doubt (a timeout, a broken connection)."""
        key = _session_key(session.spec)
        if self._sessions.get(key) is session:
            del self._sessions[key]
        await session.close()

    async def readiness(self, contracts: Sequence[ToolContract]) -> dict[str, Drift | Failure]:
        """Check every pinned contract against its server (one listing per server).

        Returns the tools that are not ready: their drift, or the failure to reach their server.
        """
        # grouped as sessions are: bindings of one server with another credential, CA or
        # environment are each listed over their own session, so no binding is reported ready
        # on another's credential (nor is a credential sent for another binding)
        groups: dict[tuple[Any, ...], tuple[McpServerSpec, list[ToolContract]]] = {}
        for contract in contracts:
            spec = self._servers.get(contract.id)
            if spec is not None:
                groups.setdefault(_session_key(spec), (spec, []))[1].append(contract)
        out: dict[str, Drift | Failure] = {}
        for spec, group in groups.values():
            try:
                listed = await self._listed(spec)
            except Failure as exc:
                out.update(dict.fromkeys((c.id for c in group), exc))
                continue
            out.update({d.tool_id: d for c in group if (d := compare(c, listed)) is not None})
        return out

    async def _listed(self, spec: McpServerSpec) -> list[types.Tool]:
        """The server's tools, listed on its kept session (so readiness starts no process)."""
        session = await self._session(spec, within=LIST_TIMEOUT_S)
        reused = session.used
        try:
            with anyio.fail_after(LIST_TIMEOUT_S):
                tools = await _all_tools(await session.client())
        except Exception as exc:
            await self._discard(session)
            if reused and not isinstance(exc, TimeoutError):
                return await self._listed(spec)  # it had died since: once more, on a new one
            if isinstance(exc, TimeoutError):
                raise TransientExternal(
                    f"the MCP server {spec.label} did not list its tools within "
                    f"{LIST_TIMEOUT_S:g} s",
                    reason=EXECUTOR_UNREACHABLE,
                ) from None
            raise _not_reached(spec, exc) from None
        session.used = True
        return tools

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        contract = request.contract
        spec = self._servers.get(contract.id)
        if spec is None or contract.upstream is None:
            return failed(
                ContractViolation(
                    f"{contract.id} has no MCP server binding or no pinned upstream tool",
                    reason=TOOL_NOT_READY,
                ),
                dispatched=False,
            )
        started = anyio.current_time()
        outcome = await self._attempt(request, spec, contract.upstream.name, request.deadline_s)
        if outcome is _STALE:  # a kept session had died meanwhile: once more, on a new one
            left = request.deadline_s - (anyio.current_time() - started)
            outcome = await self._attempt(request, spec, contract.upstream.name, left)
        assert isinstance(outcome, ExecutionOutcome)
        return outcome

    async def _attempt(
        self, request: ExecutionRequest, spec: McpServerSpec, upstream: str, timeout: float
    ) -> ExecutionOutcome | object:
        contract = request.contract
        sent = False
        started = anyio.current_time()
        try:
            session = await self._session(spec, within=max(timeout, 0.0))
        except Failure as exc:
            return failed(exc, dispatched=False)
        reused = session.used
        try:  # (what resolving the name took is part of the deadline)
            with anyio.fail_after(max(timeout - (anyio.current_time() - started), 0.0)):
                client = await session.client()
                drift = compare(contract, await _all_tools(client))
                if drift is not None:
                    if self.on_mismatch is not None:
                        self.on_mismatch(contract.id)
                    return failed(
                        ContractViolation(
                            f"not ready: {drift.describe()}",
                            reason=TOOL_NOT_READY,
                            details=drift.to_dict(),
                        ),
                        dispatched=False,
                    )
                sent = session.used = True
                result = await client.call_tool(
                    upstream,
                    dict(request.arguments),
                    meta=types.RequestParamsMeta(
                        {"charter/idempotency_key": request.context.idempotency_key}  # type: ignore[typeddict-unknown-key]
                    ),
                )
        except TimeoutError:
            await self._discard(session)
            if not sent:
                return self._unreachable(request, spec, "did not answer in time")
            return unknown(
                failure_from(
                    "timeout", TIMEOUT, "the MCP server did not answer within the deadline"
                )
            )
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:  # the SDK's word for a broken connection
                return await self._broken(request, session, sent=sent, reused=reused, why=exc)
            if not sent:
                return self._unreachable(request, spec, f"protocol error {exc.error.code}")
            return self._jsonrpc_error(request, exc.error)
        except Exception as exc:  # transport failures of any kind, translated here
            return await self._broken(request, session, sent=sent, reused=reused, why=exc)
        return self._result(request, result)

    async def _broken(
        self,
        request: ExecutionRequest,
        session: _Session,
        *,
        sent: bool,
        reused: bool,
        why: BaseException,
    ) -> ExecutionOutcome | object:
        """The connection failed: nothing sent is safe to try again (a kept session may simply
        have died since its last call); after the call was sent the outcome is unknown."""
        await self._discard(session)
        if not sent and reused:
            return _STALE
        if not sent:
            refused = _not_reached(session.spec, why)
            if refused.reason == EXECUTOR_REFUSED:  # (its message holds no argument)
                return failed(refused, dispatched=False)
            return self._unreachable(request, session.spec, _why(why))
        return unknown(
            failure_from(
                "transient_external",
                CONNECTION_LOST,
                f"the connection to the MCP server broke after the call was sent "
                f"({type(why).__name__})",
            )
        )

    def _jsonrpc_error(self, request: ExecutionRequest, error: types.ErrorData) -> ExecutionOutcome:
        """The server answered the sent call with a JSON-RPC error instead of a result.

        Only an error that says the request was never taken up as a tool call (it did not
        parse, was no valid request, or the server has no ``tools/call``) proves nothing ran:
        ``failed``, not dispatched. Any other code does not: the SDK's own servers answer
        ``-32603`` — or ``-32602``, for a validation error raised anywhere in the handler —
        when a tool raises after its effect, so a write is ``unknown`` (never ``failed``, which
        a caller may retry under a new call id) and a read ``failed`` (:func:`in_doubt`).
        """
        contract = request.contract
        said = self._redact(error.message[:500], request)
        details = {"jsonrpc_code": error.code}
        if error.code in NOTHING_RAN:
            return failed(
                failure_from(
                    "invalid_input",
                    UPSTREAM_REFUSED,
                    f"the MCP server refused the call before running it: JSON-RPC error "
                    f"{error.code} ({said})",
                    details=details,
                ),
                dispatched=False,
            )
        if error.code == REQUEST_TIMEOUT:  # the server gave up on its own deadline
            return unknown(
                failure_from(
                    "timeout",
                    TIMEOUT,
                    f"the MCP server answered a request timeout ({said}) after the call was sent",
                    details=details,
                )
            )
        doubt = (
            ""
            if contract.read_only
            else (f"; the effect of tool {contract.id} may or may not have happened")
        )
        return in_doubt(
            failure_from(
                "transient_external",
                UPSTREAM_PROTOCOL_ERROR,
                f"the MCP server answered JSON-RPC error {error.code} ({said}) after the call "
                f"was sent{doubt}",
                details=details,
                retryable=contract.read_only,
            ),
            read_only=contract.read_only,
        )

    def _unreachable(
        self, request: ExecutionRequest, spec: McpServerSpec, why: str
    ) -> ExecutionOutcome:
        return failed(
            failure_from(
                "transient_external",
                EXECUTOR_UNREACHABLE,
                self._redact(f"the MCP server {spec.label} is unreachable: {why}", request),
            ),
            dispatched=False,
        )

    def _result(self, request: ExecutionRequest, result: types.CallToolResult) -> ExecutionOutcome:
        text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
        if result.is_error:
            return failed(
                failure_from(
                    "internal",
                    UPSTREAM_TOOL_ERROR,
                    self._redact(f"the MCP tool reported an error: {text[:2000]}", request),
                )
            )
        value: Any
        if result.structured_content is not None:
            value = result.structured_content
        else:
            value = {
                "content": [
                    b.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for b in result.content
                ]
            }
        try:
            return succeeded(ensure_json(value))
        except Failure as exc:  # it ran: a write's effect is in doubt, never "failed"
            return in_doubt(exc, read_only=request.contract.read_only)


def _not_reached(spec: McpServerSpec, exc: BaseException, *, hint: str = CA_HINT) -> Failure:
    """Why a session could not be opened: the server refused the binding's credential
    (HTTP 401/403: ``permission_denied`` / ``EXECUTOR_REFUSED``, as an ``http`` executor's
    describe), else ``EXECUTOR_UNREACHABLE``."""
    if isinstance(exc, HttpRefused) and exc.status in (401, 403):
        return PermissionDenied(
            f"the MCP server {spec.label} refused the binding's credential: {exc}",
            reason=EXECUTOR_REFUSED,
            details={"http_status": exc.status},
        )
    return TransientExternal(
        f"the MCP server {spec.label} could not be reached: {_why(exc, hint=hint)}",
        reason=EXECUTOR_UNREACHABLE,
    )


def _why(exc: BaseException, *, hint: str = CA_HINT) -> str:
    """A failed connection's reason: a certificate that did not verify, or an HTTP status the
    server refused the session with, says so."""
    if isinstance(exc, HttpRefused):
        return str(exc)
    return connect_failure(exc, hint=hint)


def spec_from_options(options: Mapping[str, Any], *, root: Path | None) -> McpServerSpec:
    """A server from an ``executor: mcp`` binding's options (``command`` or ``url`` +
    ``credential``, a loaded secret reference; ``cwd`` relative to the project)."""
    command = options.get("command")
    url = options.get("url")
    cred = options.get("credential")
    cwd_opt = options.get("cwd")
    ca = options.get("ca")
    cwd = Path(cwd_opt) if cwd_opt is not None else root
    if cwd is not None and not cwd.is_absolute() and root is not None:
        cwd = root / cwd
    return McpServerSpec(
        command=tuple(str(c) for c in command) if isinstance(command, list | tuple) else None,
        url=str(url) if url is not None else None,
        credential=cred.resolve() if cred is not None and hasattr(cred, "resolve") else None,
        cwd=cwd,
        ca=getattr(ca, "pem", None),  # a CertificateAuthority, read when the deployment loaded
    )


def mcp_executor(
    bindings: Mapping[str, Any],
    *,
    root: Path | None,
    redact_message: MessageRedactor,
    egress: EgressPolicy | None = None,
) -> McpExecutor | None:
    """The executor for every ``executor: mcp`` binding (``{tool id: Binding}``), or ``None``."""
    servers = {
        tool_id: spec_from_options(b.options, root=root)
        for tool_id, b in bindings.items()
        if b.executor == "mcp"
    }
    if not servers:
        return None
    return McpExecutor(servers=servers, redact_message=redact_message, egress=egress)
