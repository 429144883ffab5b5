"""Streamable HTTP: ``charter mcp --transport http`` and the ``/mcp/{profile}`` mount.

The SDK runs in **stateless** mode (a fresh transport per request, JSON responses), so any
replica can answer any request. Every request is authenticated by its bearer credential
(``Authorization: Bearer KEY``, checked by ``authenticate`` — normally
``Deployment.authenticate``); the credential alone decides the principal. Without one the
answer is ``401`` with a problem document, as on ``/v1``: ``AUTH_MISSING``, ``AUTH_INVALID``,
or the reason ``authenticate`` raised (a :class:`~charter.errors.PermissionDenied`). An MCP
session id, if a client sends one, is never used to identify anyone.

A ``tools/call`` still running when the server stops (its grace period over) is cut off and
answers the envelope the kernel recorded for it (:mod:`charter.mcp._cut`); a stopping endpoint
waits for such answers (at most :data:`~charter.mcp._cut.ANSWER_S`) before its session manager
stops.

Within one process, the governed session (the ad-hoc ``mcp-session`` run, its context and the
idempotency keys it has seen) is kept per principal and profile, so a client's identical
retry with the same ``idempotency_key`` reaches the same call. Across replicas that memory is
not shared: see ``docs/mcp.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import CONTENT_TYPE_JSON, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from charter.contracts.problem import (
    ACCEPT_IDENTITY,
    PROBLEM_MEDIA_TYPE,
    content_coding_refused,
    problem_body,
)
from charter.errors import ErrorCode, PermissionDenied
from charter.kernel.principals import Principal
from charter.mcp._cut import ANSWER_S, Cut, served
from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._server import build_server
from charter.mcp._wire import MAX_MESSAGE_BYTES, Checked, Refusal, check_line
from charter.runtime import Runtime

Authenticate = Callable[[str], Principal | None]
"""A bearer credential's principal; None (or a raised PermissionDenied, whose reason the 401
carries) when it names none."""
SCOPE_KEY = "charter.principal"
RAW_KEY = "charter.raw_arguments"  # a tools/call's arguments as written (charter.mcp._wire)
CUT_KEY = "charter.cut"  # the request's kernel calls, which a stopping server cuts off


async def _respond(
    send: Send,
    status: int,
    body: dict[str, Any],
    headers: list[Any],
    media_type: bytes = b"application/json",
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media_type),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def _problem(
    send: Send, status: int, code: ErrorCode, reason: str, detail: str, headers: list[Any]
) -> None:
    """An HTTP-level refusal (before any JSON-RPC is read) as the ``/v1`` API answers one: a
    problem document (:mod:`charter.contracts.problem`)."""
    body = problem_body(status=status, code=code, reason=reason, detail=detail)
    await _respond(send, status, body, headers, PROBLEM_MEDIA_TYPE.encode())


def _authorizations(scope: Scope) -> list[str]:
    """Every ``Authorization`` header of an ASGI request (ASGI names are lower-case)."""
    return [v.decode("latin-1") for n, v in scope.get("headers", ()) if n == b"authorization"]


def bearer(scope: Scope) -> str | None:
    """The bearer credential of an ASGI request, or ``None`` (also when there are several
    ``Authorization`` headers: none of them is *the* credential)."""
    sent = _authorizations(scope)
    kind, _, token = (sent[0] if len(sent) == 1 else "").partition(" ")
    if kind.lower() == "bearer" and token.strip():
        return token.strip()
    return None


_CHALLENGE = [(b"www-authenticate", b'Bearer realm="charter"')]


def _who(scope: Scope, authenticate: Authenticate) -> Principal | PermissionDenied:
    """The principal the request's bearer credential names, or why there is none (the
    ``/v1`` API's reasons: ``AUTH_MISSING``, ``AUTH_INVALID``, or the authenticator's own)."""
    sent = _authorizations(scope)
    if len(sent) > 1:  # ambiguous, as on /v1: a proxy in front may have read the other one
        why = f"the Authorization header was sent {len(sent)} times: send one credential"
        return PermissionDenied(why, reason="AUTH_INVALID")
    token = bearer(scope)
    if token is None:
        if any(sent):
            why = "the Authorization header must be 'Bearer <credential>'"
            return PermissionDenied(why, reason="AUTH_INVALID")
        return PermissionDenied("send Authorization: Bearer <credential>", reason="AUTH_MISSING")
    try:
        principal = authenticate(token)
    except PermissionDenied as exc:  # the API's authenticator names the reason (a JWT's)
        return exc
    if principal is None:
        return PermissionDenied("the credential is not valid", reason="AUTH_INVALID")
    return principal


class McpEndpoint:
    """One profile over streamable HTTP: an ASGI app (run :meth:`running` around it)."""

    def __init__(self, runtime: Runtime, profile: str, authenticate: Authenticate) -> None:
        self.gateway = Gateway(runtime, profile)
        self.authenticate = authenticate
        self._sessions: dict[str, McpSession] = {}
        self.server = build_server(self.gateway, self._identify, _raw_arguments, _cut_of)
        self.requests = 0  # requests being served: a stopping endpoint waits for their answers
        self.manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, json_response=True
        )

    async def _identify(self, ctx: ServerRequestContext[Any, Any]) -> tuple[Principal, McpSession]:
        request = ctx.request
        scope = getattr(request, "scope", None)
        principal = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
        if not isinstance(principal, Principal):
            # Unreachable behind __call__ (which refuses unauthenticated requests): fail closed.
            raise PermissionDenied("unauthenticated", reason="UNAUTHENTICATED")
        key = f"{principal.tenant}\x00{principal.name}"
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions.setdefault(key, McpSession(request_ids_unique=False))
        return principal, session

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            try:
                yield
            finally:
                # The server is stopping: the requests it cut off at the end of its grace
                # period are sending their calls' recorded answers through the manager.
                deadline = time.monotonic() + ANSWER_S
                while self.requests > 0 and time.monotonic() < deadline:
                    await anyio.sleep(0.01)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.requests += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            self.requests -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = _who(scope, self.authenticate)
        if isinstance(principal, PermissionDenied):
            denied = principal
            await _problem(send, 401, denied.code, denied.reason, denied.message, _CHALLENGE)
            return
        if scope.get("method") != "POST":
            await _problem(send, *_method_refused(scope))
            return
        coded = _coded(scope)
        if coded is not None:  # nothing decompresses it: refused before it is read
            await _problem(send, *coded)
            return
        scope = {**scope, SCOPE_KEY: principal, "headers": _media_type_lowered(scope)}
        body, checked = await _checked_body(receive)
        # An empty body is the guard's -32700 whatever its headers (no message at all); else
        # what the SDK's transport would refuse unread is refused first, with its reason.
        refused = None if not body.strip() else _unservable(scope)
        if refused is not None:
            await _problem(send, *refused)
            return
        if checked.refusal is not None:
            await _refuse(send, checked.refusal)
            return
        if checked.raw_arguments is not None and checked.text is not None:
            scope[RAW_KEY] = checked.raw_arguments
            body = checked.text.encode()
        receive = _replay(body, receive)
        cut = scope[CUT_KEY] = Cut()
        await served(self.manager.handle_request(scope, receive, send), cut)


_POST_ONLY = [(b"allow", b"POST")]
Refused = tuple[int, ErrorCode, str, str, list[Any]]
"""An HTTP-level refusal: status, code, reason, detail and headers of its problem document."""


def _method_refused(scope: Scope) -> Refused:
    """The endpoint is stateless, so there is no server-initiated stream to open (a ``GET``:
    the SDK would hold it open, silent, for as long as the client waits) and no session to end
    (``DELETE``): only ``POST`` is served."""
    why = (
        f"{scope.get('method')} is not served: this endpoint is stateless (no "
        "server-initiated stream, no session to end); POST one JSON-RPC message"
    )
    return 405, ErrorCode.INVALID_INPUT, "METHOD_NOT_ALLOWED", why, _POST_ONLY


def _coded(scope: Scope) -> Refused | None:
    """A body with a ``Content-Encoding`` other than ``identity``: ``415``, as on ``/v1``."""
    sent = (v.decode("latin-1") for n, v in scope.get("headers", ()) if n == b"content-encoding")
    why = content_coding_refused(sent)
    if why is None:
        return None
    accept = [(k.lower().encode(), v.encode()) for k, v in ACCEPT_IDENTITY.items()]
    return 415, ErrorCode.INVALID_INPUT, "UNSUPPORTED_MEDIA_TYPE", why, accept


def _media_type_lowered(scope: Scope) -> list[tuple[bytes, bytes]]:
    """The request's headers with its ``Content-Type`` media type in lower case (its
    parameters as sent): media types are case-insensitive (RFC 9110, 8.3.1), and the SDK's
    transport compares ``application/json`` case-sensitively, so ``Application/JSON`` would
    be refused."""
    headers: list[tuple[bytes, bytes]] = []
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-type":
            media, sep, params = value.partition(b";")
            value = media.lower() + sep + params
        headers.append((name, value))
    return headers


def _unservable(scope: Scope) -> Refused | None:
    """Why the SDK's transport would refuse this POST before reading its message — as a
    problem document with its reason, like every other HTTP-level refusal here — or None.

    The tests are the SDK's own, so a request it serves is never refused here: the body needs
    ``Content-Type: application/json`` (its two checks: the transport security's prefix and
    the transport's media type) and an ``Accept`` that admits JSON (its
    ``check_accept_headers``; the answers are JSON only).
    """
    request = Request(scope)
    media = request.headers.get("content-type", "")
    if not (
        media.lower().startswith(CONTENT_TYPE_JSON)
        and any(part.strip() == CONTENT_TYPE_JSON for part in media.split(";")[0].split(","))
    ):
        why = "Content-Type must be application/json: a POST carries one JSON-RPC message"
        return 415, ErrorCode.INVALID_INPUT, "UNSUPPORTED_MEDIA_TYPE", why, []
    if not check_accept_headers(request)[0]:
        why = "Accept must admit application/json (the answers are JSON, not an event stream)"
        return 406, ErrorCode.INVALID_INPUT, "NOT_ACCEPTABLE", why, []
    return None


def _cut_of(ctx: ServerRequestContext[Any, Any]) -> Cut | None:
    scope = getattr(ctx.request, "scope", None)
    cut = scope.get(CUT_KEY) if isinstance(scope, dict) else None
    return cut if isinstance(cut, Cut) else None


def _raw_arguments(ctx: ServerRequestContext[Any, Any]) -> str | None:
    scope = getattr(ctx.request, "scope", None)
    raw = scope.get(RAW_KEY) if isinstance(scope, dict) else None
    return raw if isinstance(raw, str) else None


async def _checked_body(receive: Receive) -> tuple[bytes, Checked]:
    """The request's body, and the JSON-RPC error it earns (the same checks as the stdio
    wire's: charter.mcp._wire, and an empty body is ``-32700``), read up to
    :data:`MAX_MESSAGE_BYTES`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            why = f"Parse error: the message is longer than {MAX_MESSAGE_BYTES} bytes"
            refusal = (None, types.PARSE_ERROR, why, {"reason": "MESSAGE_TOO_LARGE"})
            return b"", Checked(None, refusal)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    if not body.strip():  # a blank stdio line is skipped; a POST is one message, none here
        why = "Parse error: the body is empty (a POST carries one JSON-RPC message)"
        return body, Checked(None, (None, types.PARSE_ERROR, why, {"reason": "MESSAGE_NOT_JSON"}))
    return body, check_line(body)


def _replay(body: bytes, after: Receive) -> Receive:
    """A ``receive`` that gives the SDK the body already read, then the client's own messages
    (its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await after()

    return receive


async def _refuse(send: Send, refusal: Refusal) -> None:
    ident, code, message, data = refusal
    status = 200 if code == types.INVALID_PARAMS else 400  # as the SDK answers them
    body = {
        "jsonrpc": "2.0",
        "id": ident,
        "error": {"code": code, "message": message, "data": data},
    }
    await _respond(send, status, body, [])


class McpApp:
    """Every profile of a runtime at ``/{profile}`` (mounted at ``/mcp`` by :func:`mount_mcp`).

    Unknown profiles answer 404 (``PROFILE_UNKNOWN``, a problem document) before
    authentication is even looked at.
    """

    def __init__(self, runtime: Runtime, authenticate: Authenticate) -> None:
        self.endpoints = {
            name: McpEndpoint(runtime, name, authenticate) for name in runtime.build.profiles
        }

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for endpoint in self.endpoints.values():
                await stack.enter_async_context(endpoint.running())
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(self, receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope.get("path", "/")
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        profile = path.strip("/").split("/", 1)[0]
        endpoint = self.endpoints.get(profile)
        if endpoint is None:
            why = "no such profile: each profile is served at /mcp/{profile}"
            await _problem(send, 404, ErrorCode.INVALID_INPUT, "PROFILE_UNKNOWN", why, [])
            return
        if path.strip("/") != profile:
            why = "no such route: a profile is served at /mcp/{profile} itself"
            await _problem(send, 404, ErrorCode.INVALID_INPUT, "ROUTE_NOT_FOUND", why, [])
            return
        await endpoint(scope, receive, send)


async def _lifespan(app: McpApp, receive: Receive, send: Send) -> None:
    """Run ``app`` standalone under an ASGI server (uvicorn): start and stop its managers."""
    message = await receive()
    assert message["type"] == "lifespan.startup"
    async with app.running():
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
    await send({"type": "lifespan.shutdown.complete"})


def mcp_app(runtime: Runtime, authenticate: Authenticate | None = None) -> McpApp:
    """An ASGI app serving every profile at ``/{profile}`` (standalone: ``uvicorn``).

    ``authenticate`` defaults to the runtime's ``Deployment.authenticate``.
    """
    return McpApp(runtime, authenticate or runtime.deployment.authenticate)


def mount_mcp(app: Any, runtime: Runtime, authenticate: Authenticate | None = None) -> McpApp:
    """Mount the MCP endpoints of every profile at ``/mcp/{profile}`` in a Starlette/FastAPI
    ``app`` and run their session managers inside the app's lifespan."""
    mcp = mcp_app(runtime, authenticate)
    app.mount("/mcp", mcp)
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(inner: Any) -> AsyncIterator[Any]:
        async with mcp.running(), previous(inner) as state:
            yield state

    app.router.lifespan_context = lifespan
    return mcp
