"""``charter.remote.app``: an ASGI app serving ``@charter.tool`` functions over
``charter.executor.v1`` — ``GET /describe`` and ``POST /execute``.

A body sent with a ``Content-Encoding`` other than ``identity``, or a ``Content-Type`` that is
not JSON, is ``415 UNSUPPORTED_MEDIA_TYPE`` before it is read; a body over ``max_body_bytes``
is ``413 BODY_TOO_LARGE`` (by its ``Content-Length``, or as soon as it grows past the limit), one
that has not arrived whole after ``body_timeout_s`` ``408 BODY_TIMEOUT``
(:mod:`charter.remote._request`). Every request must carry the bearer credential and a fresh,
valid signature, each credential header once (see :mod:`charter.executors.http_protocol`);
otherwise 401 with the reason. ``/execute`` then:

1. parses the body strictly (400 ``BAD_REQUEST`` saying what is wrong: a repeated member by
   its JSON Pointer, ``NaN``, a member of the wrong type…), finds the tool (404
   ``TOOL_NOT_DESCRIBED``), checks the caller's tool version and contract digest against this
   executor's (409 ``CONTRACT_MISMATCH``), the deadline (408 ``DEADLINE_PASSED``) and the
   arguments against the kernel's intake rules (``ARGS_TOO_DEEP``,
   ``ARGS_INTEGER_OUT_OF_RANGE``…), the contract's schema and the function's signature (400
   ``ARGS_INVALID``) — every 4xx is answered before anything runs;
2. claims the idempotency key in the journal (a key seen before answers with the recorded
   response; the same key with another call or other arguments is 409
   ``IDEMPOTENCY_CONFLICT``);
3. runs the function (sync functions in a worker thread), records the response, answers 200
   with ``{call_id, status: succeeded, result}`` or ``{call_id, status: failed, error}`` —
   a tool's error message is escaped where it is not valid Unicode, so every answer can be
   recorded and the key never stays ``running`` because of what a tool said.

Every response — refusals included — is signed with the signing key over the request's call
id, idempotency key, contract digest and nonce, the HTTP status and the body's hash
(:func:`charter.executors.http_protocol.response_signature`), so the client accepts nothing
an impostor on the executor's address sends.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import inspect
import os
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from charter.contracts.canonical import canonical_bytes
from charter.contracts.decorator import declaration, declared_contract
from charter.contracts.delegation import delegating
from charter.contracts.intake import check_value
from charter.contracts.model import ToolContract
from charter.contracts.problem import ACCEPT_IDENTITY, ACCEPT_JSON, content_coding_refused
from charter.contracts.schema import CompiledSchema, compile_schema
from charter.contracts.text import clipped
from charter.contracts.tool_context import Context
from charter.errors import ConfigError, Failure, InvalidInput
from charter.executors.http_protocol import (
    AUTH_INVALID,
    AUTH_MISSING,
    DEFAULT_TOLERANCE_S,
    NONCE_HEADER,
    NONCE_HEX_CHARS,
    PROTOCOL,
    REPLAYED,
    RESPONSE_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    SIGNATURE_INVALID,
    TIMESTAMP_HEADER,
    TIMESTAMP_STALE,
    StrictJSONError,
    dumps,
    loads_strict,
    nonce_valid,
    response_signature,
    signature_matches,
    timestamp_fresh,
)
from charter.kernel.executor_port import ensure_json
from charter.remote._journal import Claim, Journal
from charter.remote._request import (
    not_an_object,
    not_strict_json,
    repeated_credential,
    type_refused,
)

MIN_SECRET_BYTES = 16
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_BODY_TIMEOUT_S = 30.0
MAX_ID_CHARS = 256
IN_FLIGHT_POLL_S = 0.05
IN_FLIGHT_WAIT_S = 30.0
CREDENTIAL_ENV = "CHARTER_EXECUTOR_CREDENTIAL"
SIGNING_KEY_ENV = "CHARTER_EXECUTOR_SIGNING_KEY"


class _Tool:
    __slots__ = ("args", "context_param", "contract", "function", "is_async", "signature")

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.contract: ToolContract = declared_contract(function)
        decl = declaration(function)
        self.context_param = decl.context_param if decl is not None else None
        self.is_async = inspect.iscoroutinefunction(function)
        self.signature = inspect.signature(function)
        self.args: CompiledSchema = compile_schema(self.contract.args_schema)


class _Refused(Exception):
    """Answer with a 4xx/5xx before anything runs."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        code: str = "invalid_input",
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.reason, self.message, self.code = status, reason, message, code
        self.headers = dict(headers or {})


def _secret(value: str | bytes | None, env: str, what: str) -> bytes:
    if value is None:
        found = os.environ.get(env)
        if found is None:
            raise ConfigError(f"charter.remote.app: give {what}= or set {env}")
        value = found
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    raw = raw.rstrip(b"\r\n")
    if len(raw) < MIN_SECRET_BYTES:
        raise ConfigError(f"charter.remote.app: {what} is shorter than {MIN_SECRET_BYTES} bytes")
    return raw


def _collect(tools: Iterable[Callable[..., Any]] | ModuleType) -> list[Callable[..., Any]]:
    if isinstance(tools, ModuleType):
        module = tools
        return [
            obj
            for _, obj in sorted(vars(module).items())
            if callable(obj)
            and declaration(obj) is not None
            and getattr(obj, "__module__", None) == module.__name__
        ]
    return list(tools)


def app(
    tools: Iterable[Callable[..., Any]] | ModuleType,
    *,
    name: str,
    version: str,
    credential: str | bytes | None = None,
    signing_key: str | bytes | None = None,
    journal: str | Path = "executor-journal.db",
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """Build the ASGI app serving ``tools`` (``@charter.tool`` functions, or a module's).

    ``credential`` (the bearer token) and ``signing_key`` (the HMAC key) default to the
    environment variables ``CHARTER_EXECUTOR_CREDENTIAL`` / ``CHARTER_EXECUTOR_SIGNING_KEY``;
    each is at least 16 bytes and they must differ. ``journal`` is the SQLite file of the
    idempotency journal. A request body is at most ``max_body_bytes`` and must arrive whole
    within ``body_timeout_s``. Serve it with any ASGI server, e.g.
    ``uvicorn.run(app, host="127.0.0.1", port=8765)``.
    """
    cred = _secret(credential, CREDENTIAL_ENV, "credential")
    key = _secret(signing_key, SIGNING_KEY_ENV, "signing_key")
    if hmac.compare_digest(cred, key):
        raise ConfigError("charter.remote.app: credential and signing_key must differ")
    served: dict[str, _Tool] = {}
    for function in _collect(tools):
        tool = _Tool(function)
        if tool.contract.id in served:
            raise ConfigError(f"charter.remote.app: tool {tool.contract.id} is served twice")
        served[tool.contract.id] = tool
    if not served:
        raise ConfigError("charter.remote.app: no @charter.tool function to serve")
    server = _Server(
        tools=served,
        name=name,
        version=version,
        credential_digest=hashlib.sha256(cred).digest(),
        signing_key=key,
        journal=Journal(journal),
        tolerance_s=tolerance_s,
        max_body_bytes=max_body_bytes,
        body_timeout_s=body_timeout_s,
        clock=clock,
    )
    application = Starlette(
        routes=[
            Route("/describe", server.describe, methods=["GET"]),
            Route("/execute", server.execute, methods=["POST"]),
        ]
    )
    application.state.journal = server.journal
    application.state.tools = tuple(sorted(served))
    return application


def _path_as_sent(request: Request) -> str:
    """The request path as the client sent it, percent-encoding included (what
    charter.executor.v1 signs: the app mounted at ``/exec%20v1`` sees ``/exec v1`` decoded),
    else the decoded path when the server gives no raw path."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return raw.decode("latin-1").split("?", 1)[0]
    return request.url.path


def _json(status: int, value: Any) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json")


def _recorded(claim: Claim) -> Response:
    """The response recorded for an idempotency key, byte for byte."""
    assert claim.http_status is not None
    assert claim.response is not None
    return Response(claim.response, status_code=claim.http_status, media_type="application/json")


def _refusal(exc: _Refused) -> Response:
    error = {"code": exc.code, "reason": exc.reason, "message": exc.message}
    response = _json(exc.status, {"error": error})
    response.headers.update(exc.headers)
    return response


class _Server:
    def __init__(
        self,
        *,
        tools: Mapping[str, _Tool],
        name: str,
        version: str,
        credential_digest: bytes,
        signing_key: bytes,
        journal: Journal,
        tolerance_s: float,
        max_body_bytes: int,
        body_timeout_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.tools = dict(tools)
        self.credential_digest = credential_digest
        self.signing_key = signing_key
        self.journal = journal
        self.tolerance_s = tolerance_s
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.clock = clock
        self.description = dumps(
            {
                "protocol": PROTOCOL,
                "executor": {"name": name, "version": version},
                "tools": [
                    {
                        "id": t.contract.id,
                        "version": t.contract.version,
                        "contract_digest": t.contract.digest,
                    }
                    for _, t in sorted(self.tools.items())
                ],
            }
        )

    # -----------------------------------------------------------------------------------
    # authentication

    async def _body(self, request: Request) -> bytes:
        """The whole body: at most ``max_body_bytes`` (413, by its declared length before
        reading any of it), arrived within ``body_timeout_s`` (408; the connection closes)."""
        too_large = _Refused(
            413,
            "BODY_TOO_LARGE",
            f"the request body is larger than {self.max_body_bytes} bytes",
            "resource_limit",
        )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.body_timeout_s) as reading:
            try:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise too_large
                    chunks.append(chunk)
            except ClientDisconnect:  # no one is left to answer; nothing was read or run
                raise _Refused(
                    400, "BODY_INCOMPLETE", "the client went away before the body arrived"
                ) from None
        if reading.cancelled_caught:
            raise _Refused(
                408,
                "BODY_TIMEOUT",
                f"the request body did not arrive whole within {self.body_timeout_s:g} seconds",
                "timeout",
                {"Connection": "close"},
            )
        return b"".join(chunks)

    @staticmethod
    def _media(request: Request) -> None:
        """Refuse, before reading it, a body that is encoded or not sent as JSON (415)."""
        coded = content_coding_refused(request.headers.getlist("content-encoding"))
        if coded is not None:
            raise _Refused(415, "UNSUPPORTED_MEDIA_TYPE", coded, headers=ACCEPT_IDENTITY)
        mistyped = type_refused(request.headers.getlist("content-type"))
        if mistyped is not None:
            raise _Refused(415, "UNSUPPORTED_MEDIA_TYPE", mistyped, headers=ACCEPT_JSON)

    async def _authenticate(self, request: Request, body: bytes) -> None:
        repeated = repeated_credential(name for name, _ in request.headers.items())
        if repeated is not None:
            name, times = repeated
            reason = AUTH_INVALID if name == "Authorization" else SIGNATURE_INVALID
            message = f"the {name} header was sent {times} times"
            raise _Refused(401, reason, message, "permission_denied")
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise _Refused(
                401, AUTH_MISSING, "a bearer credential is required", "permission_denied"
            )
        offered = hashlib.sha256(token.strip().encode("utf-8", "surrogateescape")).digest()
        if not hmac.compare_digest(offered, self.credential_digest):
            raise _Refused(401, AUTH_INVALID, "the credential is not valid", "permission_denied")
        timestamp = request.headers.get(TIMESTAMP_HEADER, "")
        now = self.clock()
        if not timestamp_fresh(timestamp, now, self.tolerance_s):
            raise _Refused(
                401,
                TIMESTAMP_STALE,
                f"the request timestamp is missing or more than {self.tolerance_s:g} s off",
                "permission_denied",
            )
        nonce = request.headers.get(NONCE_HEADER, "")
        offered_sig = request.headers.get(SIGNATURE_HEADER, "")
        for name, value in ((SIGNATURE_HEADER, offered_sig), (NONCE_HEADER, nonce)):
            if not value:
                message = f"the request has no {name} header"
                raise _Refused(401, SIGNATURE_INVALID, message, "permission_denied")
        if not nonce_valid(nonce):
            message = f"the {NONCE_HEADER} header must be {NONCE_HEX_CHARS} lower-case hex digits"
            raise _Refused(401, SIGNATURE_INVALID, message, "permission_denied")
        if not signature_matches(
            self.signing_key,
            offered_sig,
            request.method,
            _path_as_sent(request),
            timestamp,
            nonce,
            body,
        ):
            raise _Refused(
                401, SIGNATURE_INVALID, "the request signature is not valid", "permission_denied"
            )
        fresh = await anyio.to_thread.run_sync(
            self.journal.remember_nonce, nonce, now, self.tolerance_s
        )
        if not fresh:
            raise _Refused(
                401, REPLAYED, "this request was already received (replay)", "permission_denied"
            )

    # -----------------------------------------------------------------------------------
    # endpoints

    async def describe(self, request: Request) -> Response:
        try:
            body = await self._body(request)
            await self._authenticate(request, body)
        except _Refused as exc:
            return self._sign(_refusal(exc), request, b"", echo=False)
        return self._sign(
            Response(self.description, media_type="application/json"), request, b"", echo=False
        )

    async def execute(self, request: Request) -> Response:
        body = b""
        try:
            self._media(request)
            body = await self._body(request)
            await self._authenticate(request, body)
            call = self._parse(body)
        except _Refused as exc:
            return self._sign(_refusal(exc), request, body)
        return self._sign(await self._run(call), request, body)

    def _sign(
        self, response: Response, request: Request, body: bytes, *, echo: bool = True
    ) -> Response:
        """Sign ``response`` over the request's call id, key, digest and nonce."""
        call_id, key, digest = _echoed(body) if echo else ("", "", "")
        response.headers[RESPONSE_SIGNATURE_HEADER] = response_signature(
            self.signing_key,
            status=response.status_code,
            call_id=call_id,
            idempotency_key=key,
            contract_digest=digest,
            nonce=request.headers.get(NONCE_HEADER, ""),
            body=bytes(response.body),
        )
        return response

    def _parse(self, body: bytes) -> _Call:
        try:
            doc = loads_strict(body)
        except StrictJSONError:
            raise _Refused(400, "BAD_REQUEST", not_strict_json(body)) from None
        if not isinstance(doc, dict):
            raise _Refused(400, "BAD_REQUEST", not_an_object(doc))
        call_id, key = _id(doc, "call_id"), _id(doc, "idempotency_key")
        tool, arguments = doc.get("tool"), doc.get("arguments")
        if not isinstance(tool, dict) or not all(
            isinstance(tool.get(k), str) for k in ("id", "version", "contract_digest")
        ):
            raise _Refused(400, "BAD_REQUEST", "tool must be {id, version, contract_digest}")
        if not isinstance(arguments, dict):
            raise _Refused(400, "BAD_REQUEST", "arguments must be a JSON object")
        served = self.tools.get(tool["id"])
        if served is None:
            raise _Refused(404, "TOOL_NOT_DESCRIBED", f"this executor does not serve {tool['id']}")
        contract = served.contract
        if tool["version"] != contract.version or tool["contract_digest"] != contract.digest:
            raise _Refused(
                409,
                "CONTRACT_MISMATCH",
                f"tool {contract.id}: the caller's version or contract digest differs from "
                f"this executor's ({contract.version}, {contract.digest})",
                "contract_violation",
            )
        deadline = self._deadline(doc.get("deadline"))
        try:  # the kernel's own rules first: the schema validator is not made for hostile depth
            check_value(arguments)
        except InvalidInput as exc:
            raise _Refused(400, exc.reason, exc.message) from None
        violation = served.args.first_error(arguments)
        if violation is not None:
            raise _Refused(
                400,
                "ARGS_INVALID",
                f"the arguments do not match the schema at {violation.pointer or '/'} "
                f"({violation.keyword})",
            )
        attribution = doc.get("attribution")
        if attribution is not None and not isinstance(attribution, dict):
            raise _Refused(400, "BAD_REQUEST", "attribution must be an object")
        ctx = _context(call_id, key, contract.id, attribution or {})
        kwargs = dict(arguments)
        if served.context_param is not None:
            kwargs[served.context_param] = ctx
        try:
            served.signature.bind(**kwargs)
        except TypeError:
            raise _Refused(
                400, "ARGS_INVALID", f"the arguments do not fit the signature of {contract.id}"
            ) from None
        try:
            request = canonical_bytes({"tool": tool, "arguments": arguments})
        except (InvalidInput, ValueError, RecursionError) as exc:  # a member of `tool`
            message = exc.message if isinstance(exc, InvalidInput) else "tool nests too deeply"
            raise _Refused(400, "BAD_REQUEST", message) from None
        digest = hashlib.sha256(request).hexdigest()
        return _Call(
            call_id=call_id,
            key=key,
            tool=served,
            kwargs=kwargs,
            context=ctx,
            deadline_s=deadline,
            request_sha256=digest,
        )

    def _deadline(self, value: Any) -> float:
        """Seconds from now: a number of seconds, or an RFC 3339 instant; default 30 s."""
        if value is None:
            return IN_FLIGHT_WAIT_S
        if isinstance(value, bool):
            raise _Refused(400, "BAD_REQUEST", "deadline must be seconds or an RFC 3339 time")
        if isinstance(value, int | float):
            try:
                seconds = float(value)
            except OverflowError:  # an integer of hundreds of digits
                raise _Refused(400, "BAD_REQUEST", "deadline is out of range") from None
        elif isinstance(value, str):
            try:
                instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise _Refused(
                    400, "BAD_REQUEST", "deadline must be seconds or an RFC 3339 time"
                ) from None
            if instant.tzinfo is None:
                raise _Refused(400, "BAD_REQUEST", "an RFC 3339 deadline needs a time zone")
            seconds = instant.timestamp() - self.clock()
        else:
            raise _Refused(400, "BAD_REQUEST", "deadline must be seconds or an RFC 3339 time")
        if not seconds > 0:
            raise _Refused(408, "DEADLINE_PASSED", "the deadline has already passed", "timeout")
        return seconds

    async def _run(self, call: _Call) -> Response:
        claim = await anyio.to_thread.run_sync(
            functools.partial(
                self.journal.claim,
                call.key,
                call_id=call.call_id,
                tool_id=call.tool.contract.id,
                request_sha256=call.request_sha256,
                now=self.clock(),
            )
        )
        if claim.state == "conflict":
            return _refusal(
                _Refused(
                    409,
                    "IDEMPOTENCY_CONFLICT",
                    "this idempotency key was used for another call or other arguments",
                )
            )
        if claim.state == "running":
            return await self._await_recorded(call)
        if claim.state == "done":
            return _recorded(claim)
        status, answer = await self._invoke(call)
        payload = dumps(answer)
        await anyio.to_thread.run_sync(
            functools.partial(
                self.journal.finish,
                call.key,
                http_status=status,
                response=payload,
                now=self.clock(),
            )
        )
        return Response(payload, status_code=status, media_type="application/json")

    async def _await_recorded(self, call: _Call) -> Response:
        """A duplicate of a call still running (or orphaned by a crash): wait, then 503."""
        with anyio.move_on_after(min(call.deadline_s, IN_FLIGHT_WAIT_S)):
            while True:
                claim = await anyio.to_thread.run_sync(
                    functools.partial(
                        self.journal.lookup,
                        call.key,
                        call_id=call.call_id,
                        tool_id=call.tool.contract.id,
                        request_sha256=call.request_sha256,
                    )
                )
                if claim.state == "done":
                    return _recorded(claim)
                await anyio.sleep(IN_FLIGHT_POLL_S)
        return _refusal(
            _Refused(
                503,
                "IN_FLIGHT",
                "the same idempotency key is still running (or its process died); "
                "its outcome is not recorded yet",
                "transient_external",
            )
        )

    async def _invoke(self, call: _Call) -> tuple[int, dict[str, Any]]:
        """Run the tool: ``(200, answer)``, or ``(500, answer)`` when a tool with an effect
        returned a result that is not JSON data — it ran, so its effect is done, and a
        ``status: failed`` would invite a retry that repeats it (a 5xx reads as ``unknown``)."""
        tool = call.tool
        bound = functools.partial(tool.function, **call.kwargs)
        # A delegating tool's calls through charter.client name its span as their parent
        # (the worker thread of a sync tool gets a copy of this context).
        span = call.context.span_id if tool.contract.delegates_execution else None
        try:
            with delegating(span):
                if tool.is_async:
                    result = await bound()
                else:
                    result = await anyio.to_thread.run_sync(bound)
        except Failure as exc:
            error: dict[str, Any] = {
                "code": exc.code.value,
                "reason": _text(exc.reason),
                "message": _text(exc.message),
                "retryable": exc.retryable,
            }
            if exc.details:
                with contextlib.suppress(Failure):
                    error["details"] = ensure_json(dict(exc.details))
            return 200, {"call_id": call.call_id, "status": "failed", "error": error}
        except (Exception, SystemExit) as exc:  # a tool's sys.exit() fails it, not the app
            return 200, {
                "call_id": call.call_id,
                "status": "failed",
                "error": {
                    "code": "internal",
                    "reason": "TOOL_RAISED",
                    "message": f"tool {tool.contract.id} raised {_said(exc)}",
                },
            }
        try:
            return 200, {
                "call_id": call.call_id,
                "status": "succeeded",
                "result": ensure_json(result),
            }
        except Failure as exc:
            error = {"code": exc.code.value, "reason": exc.reason, "message": _text(exc.message)}
            status = 200 if tool.contract.read_only else 500
            return status, {"call_id": call.call_id, "status": "failed", "error": error}


class _Call:
    __slots__ = ("call_id", "context", "deadline_s", "key", "kwargs", "request_sha256", "tool")

    def __init__(
        self,
        *,
        call_id: str,
        key: str,
        tool: _Tool,
        kwargs: dict[str, Any],
        context: Context,
        deadline_s: float,
        request_sha256: str,
    ) -> None:
        self.call_id = call_id
        self.key = key
        self.tool = tool
        self.kwargs = kwargs
        self.context = context
        self.deadline_s = deadline_s
        self.request_sha256 = request_sha256


def _id(doc: Mapping[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        message = f"{name} must be a non-empty string of at most {MAX_ID_CHARS} characters"
        raise _Refused(400, "BAD_REQUEST", message)
    return value


def _text(value: str) -> str:
    """A tool's text as an answer can carry (and the journal record): lone surrogates
    escaped — ``dumps`` could not encode them, and the key would stay ``running``."""
    return clipped(value, len(value))


def _said(exc: BaseException) -> str:
    """``ValueError: no such item``: an exception's type and message, the message cut to 500
    characters and escaped — or said to be unreadable when its ``str()`` raises."""
    try:
        message = str(exc)
    except Exception:
        return f"{type(exc).__name__} (its message could not be read)"
    return f"{type(exc).__name__}: {clipped(message, 500)}"


def _echoed(body: bytes) -> tuple[str, str, str]:
    """The call id, idempotency key and contract digest a request body names ("" if not)."""
    try:
        doc = loads_strict(body)
    except StrictJSONError:
        return "", "", ""
    if not isinstance(doc, dict):
        return "", "", ""
    tool = doc.get("tool")
    digest = tool.get("contract_digest") if isinstance(tool, dict) else None
    fields = (doc.get("call_id"), doc.get("idempotency_key"), digest)
    return tuple(f if isinstance(f, str) else "" for f in fields)  # type: ignore[return-value]


def _context(call_id: str, key: str, tool_id: str, attribution: Mapping[str, Any]) -> Context:
    def text(name: str) -> str | None:
        value = attribution.get(name)
        return value if isinstance(value, str) else None

    return Context(
        call_id=call_id,
        idempotency_key=key,
        context_id=text("context_id") or "",
        run_id=text("run_id") or "",
        tool_id=tool_id,
        tenant=text("tenant"),
        principal=text("principal"),
        agent=text("agent"),
        task_id=text("task_id"),
        trace_id=text("trace_id"),
        span_id=text("span_id"),
    )
