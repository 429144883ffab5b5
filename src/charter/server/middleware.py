"""One pure ASGI middleware for every request: trace id, body size and time limits, a body's
``Content-Encoding``, access log, metrics.

Pure ASGI (not ``BaseHTTPMiddleware``) so streaming answers — SSE — pass through untouched
and the per-request overhead stays small. The trace id comes from the W3C ``traceparent``
header, else ``X-Charter-Trace-Id``, else the request span's (when a server instrumentation
opened one), else a fresh one; it is echoed in ``X-Charter-Trace-Id`` and handed to the
kernel, so the envelope, the ledger and the log line share it.

A request body with a ``Content-Encoding`` other than ``identity`` (gzip, br…) is ``415
UNSUPPORTED_MEDIA_TYPE`` on every route that takes one — the API's and the ``/mcp`` mount's —
before its body is read: nothing decompresses it, and its bytes read as JSON would be
answered as malformed.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from typing import Any

import anyio
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.contracts.problem import ACCEPT_IDENTITY, content_coding_refused
from charter.errors import ErrorCode
from charter.server.logs import log
from charter.server.problems import problem_response
from charter.server.state import ServerState
from charter.telemetry import continued, current_trace_id

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_INVALID_IDS = frozenset({"0" * 32, "0" * 16})
_TRACE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# mounted apps that answer HEAD themselves (static files) or are not this API's to change
_OWN_HEAD = ("/static/", "/console", "/mcp")
# Trace ids identify, they do not authorize: a generator seeded once from the system's entropy
# (and again in a forked child, so two workers never share a sequence) instead of a system
# call per request.
_ids = random.Random()
os.register_at_fork(after_in_child=_ids.seed)


def new_trace_id() -> str:
    """A W3C trace id: 32 lower-case hex digits, never all zero."""
    return f"{_ids.getrandbits(128) or 1:032x}"


def trace_id_of(headers: dict[bytes, bytes]) -> str:
    parent = headers.get(b"traceparent", b"").decode("latin-1").strip()
    match = _TRACEPARENT.match(parent)
    # W3C: version ff and all-zero trace or parent ids are invalid (a new trace starts)
    if match and not parent.startswith("ff") and not _INVALID_IDS & set(match.groups()):
        return match.group(1)
    given = headers.get(b"x-charter-trace-id", b"").decode("latin-1").strip()
    if _TRACE_ID.match(given):
        return given
    # A request span opened by a server instrumentation: the envelope shares its trace id.
    return current_trace_id() or new_trace_id()


class ServerMiddleware:
    def __init__(self, app: ASGIApp, *, state_of: Any) -> None:
        self.app = app
        self.state_of = state_of  # () -> ServerState | None (set once the runtime is open)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: ServerState | None = self.state_of()
        started = time.perf_counter()
        headers = dict(scope["headers"])
        trace_id = trace_id_of(headers)
        scope.setdefault("state", {})["trace_id"] = trace_id
        coded = _coded(scope) if scope["method"] in _BODY_METHODS else None
        if coded is not None:
            response = problem_response(
                code=ErrorCode.INVALID_INPUT,
                reason="UNSUPPORTED_MEDIA_TYPE",
                detail=coded,
                headers=ACCEPT_IDENTITY,
            )
            await response(scope, receive, send)
            self._log(scope, state, response.status_code, started, trace_id)
            return
        if state is not None and scope["method"] in _BODY_METHODS and not _streamed(scope):
            buffered: list[Message] | None = None
            # a body sent slowly holds a request and its buffer: it gets a deadline
            with anyio.move_on_after(state.body_timeout_s) as reading:
                buffered = await self._read_body(receive, headers, state.max_body_bytes)
            if buffered is None:
                response = problem_response(
                    code=ErrorCode.INVALID_INPUT,
                    reason="BODY_TOO_LARGE",
                    detail=f"the request body is larger than {state.max_body_bytes} bytes",
                )
                if reading.cancelled_caught:
                    response = problem_response(
                        code=ErrorCode.INVALID_INPUT,
                        reason="BODY_TIMEOUT",
                        detail="the request body did not arrive whole within "
                        f"{state.body_timeout_s:g} seconds",
                        headers={"Connection": "close"},
                    )
                await response(scope, receive, send)
                self._log(scope, state, response.status_code, started, trace_id)
                return
            receive = _replay(buffered, receive)
        status = 500
        method = scope["method"]
        head = method == "HEAD" and not scope.get("path", "").startswith(_OWN_HEAD)
        if head:  # answered as the GET would be, without its body (RFC 9110 §9.3.2)
            scope = {**scope, "method": "GET"}

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if not _streams(message) and await _gone(receive):
                    # The client hung up while the request was served (a slow call): the
                    # answer goes nowhere. Counted as the client's 499, as a hang-up mid-body.
                    status = 499
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-charter-trace-id", trace_id.encode("latin-1")),
                ]
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        if state is not None:
            state.requests += 1  # the server's stop waits for it (app.py: _drained)
        try:
            # The caller's W3C trace context (traceparent) is the parent of every span the
            # request makes: the governed call's execute_tool span and the executor request.
            with continued({k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()}):
                await self.app(scope, receive, send_wrapper)
        except ClientDisconnect:
            # The client went away mid-body: there is no one to answer and nothing was
            # recorded (an upload's partial file is removed); counted as the client's 499.
            status = 499
        finally:
            if state is not None:
                state.requests -= 1
            self._log({**scope, "method": method}, state, status, started, trace_id)

    @staticmethod
    async def _read_body(
        receive: Receive, headers: dict[bytes, bytes], limit: int
    ) -> list[Message] | None:
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return None
        messages: list[Message] = []
        total = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            total += len(message.get("body", b""))
            if total > limit:
                return None
            if not message.get("more_body", False):
                return messages

    @staticmethod
    def _log(
        scope: Scope, state: ServerState | None, status: int, started: float, trace_id: str
    ) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "(unmatched)"
        seconds = time.perf_counter() - started
        if state is not None:
            state.metrics.record_request(scope["method"], template, status)
        fields = scope.get("state", {})
        principal = fields.get("principal")
        log(
            logging.INFO,
            "request",
            method=scope["method"],
            route=template,
            status=status,
            duration_ms=round(seconds * 1000, 3),
            trace_id=trace_id,
            principal=getattr(principal, "name", None),
            tenant=getattr(principal, "tenant", None),
            run_id=fields.get("run_id"),
            call_id=fields.get("call_id"),
        )


def _coded(scope: Scope) -> str | None:
    """Why the request's body is refused for its ``Content-Encoding`` headers, or None."""
    values = (v.decode("latin-1") for n, v in scope["headers"] if n == b"content-encoding")
    return content_coding_refused(values)


def _streamed(scope: Scope) -> bool:
    """Artifact uploads stream into the store under their own limit (routes/artifacts.py)."""
    path: str = scope.get("path", "")
    return path.startswith("/v1/runs/") and path.endswith("/artifacts")


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


def _streams(start: Message) -> bool:
    """Whether a response is streamed (no ``Content-Length``: an event stream, a download),
    which may watch the connection itself: only a whole answer is checked."""
    return not any(name.lower() == b"content-length" for name, _ in start.get("headers", ()))


async def _gone(receive: Receive) -> bool:
    """Whether the client has already disconnected, without waiting: one ``receive`` that
    is cancelled unless a message is ready (as Starlette's ``Request.is_disconnected``)."""
    message: Message = {}
    with anyio.CancelScope() as scope:
        scope.cancel()
        message = await receive()
    return message.get("type") == "http.disconnect"
