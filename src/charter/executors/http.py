"""The remote HTTP executor: the client side of ``charter.executor.v1`` (DESIGN §6).

Each bound tool names an endpoint (base URL, bearer credential, signing key, timeout). A call
is one signed ``POST {url}/execute``; readiness is one signed ``GET {url}/describe``. The
answer is translated into the kernel's terms — honestly about whether an effect may have
happened:

====================================================  ==========  ===========================
what happened                                          status      reason (code)
====================================================  ==========  ===========================
no byte of the request was sent (refused, DNS, pool)   failed      ``EXECUTOR_UNREACHABLE``
                                                       (not dispatched)  (transient_external)
3xx — never followed                                   failed      ``EXECUTOR_REDIRECT``
                                                       (not dispatched)  (transient_external)
4xx — the executor refused before any effect           failed      the executor's reason, else
                                                       (not dispatched)  ``EXECUTOR_REFUSED``
5xx on a read tool                                     failed      ``EXECUTOR_ERROR``
                                                                         (transient_external)
5xx on a write/proposal tool                           unknown     ``EXECUTOR_ERROR``
deadline passed, or the connection broke after sending unknown     ``TIMEOUT`` / ``EXECUTOR_
                                                                   CONNECTION_LOST``
response bigger than the endpoint's cap                failed      ``RESPONSE_TOO_LARGE``
                                                                   (contract_violation)
malformed JSON, wrong shape, another call id           failed      ``EXECUTOR_MALFORMED_
                                                                   RESPONSE`` / ``CALL_ID_
                                                                   MISMATCH`` (contract_violation)
``{status: failed, error}``                            failed      the executor's code + reason
``{status: succeeded, result}``                        succeeded   (the kernel then checks the
                                                                   contract's result schema)
====================================================  ==========  ===========================

The protocol makes 3xx and 4xx safe to read as "not executed": a conforming executor answers
them only before running anything (``docs/executors.md``). Nothing here retries; the kernel
retries read-only idempotent tools itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from opentelemetry.trace import SpanKind

from charter import telemetry
from charter.errors import (
    ContractViolation,
    ErrorCode,
    Failure,
    InternalFailure,
    PermissionDenied,
    TimeoutFailure,
    TransientExternal,
)
from charter.executors.http_protocol import (
    PROTOCOL,
    StrictJSONError,
    dumps,
    loads_strict,
    signed_headers,
)
from charter.kernel.executor_port import (
    RESULT_TOO_LARGE,
    TIMEOUT,
    ExecutionOutcome,
    ExecutionRequest,
    MessageRedactor,
    ensure_json,
    failed,
    failure_from,
    scrub_details,
    succeeded,
    unknown,
)

EXECUTOR_UNREACHABLE = "EXECUTOR_UNREACHABLE"
EXECUTOR_REDIRECT = "EXECUTOR_REDIRECT"
EXECUTOR_REFUSED = "EXECUTOR_REFUSED"
EXECUTOR_ERROR = "EXECUTOR_ERROR"
EXECUTOR_CONNECTION_LOST = "EXECUTOR_CONNECTION_LOST"
EXECUTOR_MALFORMED_RESPONSE = "EXECUTOR_MALFORMED_RESPONSE"
EXECUTOR_NOT_BOUND = "EXECUTOR_NOT_BOUND"
CALL_ID_MISMATCH = "CALL_ID_MISMATCH"
DESCRIBE_INVALID = "DESCRIBE_INVALID"
RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DESCRIBE_TIMEOUT_S = 5.0

__all__ = [
    "RESULT_TOO_LARGE",
    "Described",
    "DescribedTool",
    "HttpEndpoint",
    "HttpExecutor",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpEndpoint:
    """Where one tool's executor lives and how to authenticate to it."""

    url: str  # base URL; the client appends /describe and /execute
    credential: bytes = field(repr=False)  # sent as the bearer token
    signing_key: bytes = field(repr=False)  # keys the request signature; never sent
    timeout_s: float | None = None  # caps the contract's timeout for this binding
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def endpoint(self, name: str) -> str:
        return self.url.rstrip("/") + "/" + name


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTool:
    id: str
    version: str
    contract_digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """A parsed ``GET /describe`` answer."""

    name: str
    version: str
    tools: Mapping[str, DescribedTool]


class _Sent:
    """Flips once the first byte of the request headers is about to go on the wire."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False

    async def __call__(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_headers.started"):
            self.sent = True


class _TooLarge(Exception):
    pass


class HttpExecutor:
    """Runs calls on remote executors; one instance serves every ``http`` binding."""

    kind = "http"

    def __init__(
        self,
        *,
        endpoints: Mapping[str, HttpEndpoint],
        redact_message: MessageRedactor,
        transport: httpx2.AsyncBaseTransport | None = None,
        clock: Any = time.time,
    ) -> None:
        self._endpoints = dict(endpoints)
        self._redact = redact_message
        self._clock = clock
        self._client = httpx2.AsyncClient(
            follow_redirects=False,
            transport=transport,
            trust_env=False,  # never route executor traffic through a proxy from the env
            limits=httpx2.Limits(keepalive_expiry=2.0),  # below uvicorn's 5 s idle close
            timeout=httpx2.Timeout(DESCRIBE_TIMEOUT_S),
        )

    @property
    def endpoints(self) -> Mapping[str, HttpEndpoint]:
        return self._endpoints

    async def aclose(self) -> None:
        await self._client.aclose()

    # -----------------------------------------------------------------------------------
    # describe

    async def describe(
        self, endpoint: HttpEndpoint, *, timeout_s: float = DESCRIBE_TIMEOUT_S
    ) -> Described:
        """``GET /describe``; raises a :class:`Failure` whose reason says what went wrong."""
        url = endpoint.endpoint("describe")
        headers = self._headers(endpoint, "GET", url, b"")
        try:
            with anyio.fail_after(timeout_s):
                status, body = await self._send("GET", url, headers, b"", endpoint, _Sent())
        except TimeoutError:
            raise TransientExternal(
                f"the executor at {endpoint.url} did not describe itself within {timeout_s:g} s",
                reason=EXECUTOR_UNREACHABLE,
            ) from None
        except _TooLarge:
            raise ContractViolation(
                f"the executor at {endpoint.url} sent a describe document over the size cap",
                reason=DESCRIBE_INVALID,
            ) from None
        except httpx2.HTTPError as exc:
            raise TransientExternal(
                f"the executor at {endpoint.url} is unreachable: {type(exc).__name__}",
                reason=EXECUTOR_UNREACHABLE,
            ) from None
        if status in (401, 403):
            raise PermissionDenied(
                f"the executor at {endpoint.url} refused our credentials (HTTP {status})",
                reason=EXECUTOR_REFUSED,
            )
        if status != 200:
            raise TransientExternal(
                f"the executor at {endpoint.url} answered describe with HTTP {status}",
                reason=EXECUTOR_UNREACHABLE,
            )
        return _parse_describe(body, endpoint.url)

    # -----------------------------------------------------------------------------------
    # execute

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        contract = request.contract
        ctx = request.context
        endpoint = self._endpoints.get(contract.id)
        if endpoint is None:
            return failed(
                InternalFailure(
                    f"tool {contract.id} has no http binding",
                    reason=EXECUTOR_NOT_BOUND,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                dispatched=False,
            )
        deadline = max(request.deadline_s, 0.0)
        if endpoint.timeout_s is not None:
            deadline = min(deadline, endpoint.timeout_s)
        body = dumps(
            {
                "call_id": ctx.call_id,
                "idempotency_key": ctx.idempotency_key,
                "tool": {
                    "id": contract.id,
                    "version": contract.version,
                    "contract_digest": contract.digest,
                },
                "arguments": dict(request.arguments),
                "deadline": deadline,
                "attribution": {
                    "tenant": ctx.tenant,
                    "principal": ctx.principal,
                    "agent": ctx.agent,
                    "run_id": ctx.run_id,
                    "context_id": ctx.context_id,
                    "task_id": ctx.task_id,
                    "trace_id": ctx.trace_id,
                },
            }
        )
        url = endpoint.endpoint("execute")
        headers = self._headers(endpoint, "POST", url, body)
        headers["Idempotency-Key"] = ctx.idempotency_key
        sent = _Sent()
        try:
            with anyio.fail_after(deadline):
                status, payload = await self._send("POST", url, headers, body, endpoint, sent)
        except TimeoutError:
            if not sent.sent:
                return self._not_sent(request, endpoint, "the deadline passed while connecting")
            ctx.cancelled.set()
            return unknown(
                self._err(
                    TimeoutFailure,
                    request,
                    f"the executor did not answer tool {contract.id} within {deadline:g} s; "
                    "its effect may or may not have happened",
                    TIMEOUT,
                )
            )
        except _TooLarge:
            return failed(
                self._err(
                    ContractViolation,
                    request,
                    f"the executor's answer exceeded {endpoint.max_response_bytes} bytes",
                    RESPONSE_TOO_LARGE,
                )
            )
        except httpx2.HTTPError as exc:
            if not sent.sent:
                return self._not_sent(request, endpoint, type(exc).__name__)
            return unknown(
                self._err(
                    TransientExternal,
                    request,
                    f"the connection to the executor broke after the request was sent "
                    f"({type(exc).__name__}); the effect of tool {contract.id} may or may not "
                    "have happened",
                    EXECUTOR_CONNECTION_LOST,
                )
            )
        return self._answer(request, status, payload)

    def _not_sent(
        self, request: ExecutionRequest, endpoint: HttpEndpoint, why: str
    ) -> ExecutionOutcome:
        return failed(
            self._err(
                TransientExternal,
                request,
                f"the executor at {endpoint.url} is unreachable ({why}); nothing was sent",
                EXECUTOR_UNREACHABLE,
                retryable=request.contract.read_only,
            ),
            dispatched=False,
        )

    def _answer(self, request: ExecutionRequest, status: int, payload: bytes) -> ExecutionOutcome:
        contract = request.contract
        if 300 <= status < 400:
            return failed(
                self._err(
                    TransientExternal,
                    request,
                    f"the executor answered HTTP {status} (a redirect, not followed); an "
                    "executor never redirects, so nothing ran — check the binding's url",
                    EXECUTOR_REDIRECT,
                    details={"http_status": status},
                ),
                dispatched=False,
            )
        if 400 <= status < 500:
            return failed(self._refusal(request, status, payload), dispatched=False)
        if status >= 500 or status < 200:
            error = self._err(
                TransientExternal,
                request,
                f"the executor answered HTTP {status} for tool {contract.id}",
                EXECUTOR_ERROR,
                details={"http_status": status},
                retryable=contract.read_only,
            )
            return failed(error) if contract.read_only else unknown(error)
        try:
            doc = loads_strict(payload)
        except StrictJSONError:
            return self._malformed(request, "the executor's answer is not valid JSON")
        if not isinstance(doc, dict):
            return self._malformed(request, "the executor's answer is not a JSON object")
        if doc.get("call_id") != request.context.call_id:
            return failed(
                self._err(
                    ContractViolation,
                    request,
                    "the executor answered for another call id",
                    CALL_ID_MISMATCH,
                )
            )
        outcome = doc.get("status")
        if outcome == "succeeded" and "result" in doc:
            try:
                return succeeded(ensure_json(doc["result"]))
            except Failure as exc:
                exc.call_id, exc.run_id = request.context.call_id, request.context.run_id
                return failed(exc)
        if outcome == "failed" and isinstance(doc.get("error"), dict):
            return failed(self._reported(request, doc["error"]))
        return self._malformed(request, "the executor's answer has no valid status")

    def _malformed(self, request: ExecutionRequest, message: str) -> ExecutionOutcome:
        return failed(self._err(ContractViolation, request, message, EXECUTOR_MALFORMED_RESPONSE))

    def _refusal(self, request: ExecutionRequest, status: int, payload: bytes) -> Failure:
        """A 4xx: use the executor's ``{error: {code, reason, message}}`` when it sent one."""
        reported: Any = None
        try:
            doc = loads_strict(payload)
            if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
                reported = doc["error"]
        except StrictJSONError:
            reported = None
        default_code = (
            ErrorCode.PERMISSION_DENIED if status in (401, 403) else ErrorCode.INVALID_INPUT
        )
        if status == 413:
            default_code = ErrorCode.RESOURCE_LIMIT
        elif status in (408, 429):
            default_code = ErrorCode.TRANSIENT_EXTERNAL
        if reported is not None:
            failure = self._reported(request, reported, default_code=default_code)
            failure.details = {**failure.details, "http_status": status}
            return failure
        return failure_from(
            default_code,
            EXECUTOR_REFUSED,
            f"the executor refused tool {request.contract.id} with HTTP {status}",
            details={"http_status": status},
            call_id=request.context.call_id,
            run_id=request.context.run_id,
        )

    def _reported(
        self,
        request: ExecutionRequest,
        error: Mapping[str, Any],
        *,
        default_code: ErrorCode = ErrorCode.INTERNAL,
    ) -> Failure:
        code = error.get("code")
        reason = error.get("reason")
        message = error.get("message")
        valid_codes = {c.value for c in ErrorCode}
        return failure_from(
            code if isinstance(code, str) and code in valid_codes else default_code,
            reason
            if isinstance(reason, str) and reason.isupper() and len(reason) <= 64
            else "EXECUTOR_FAILED",
            self._redact(str(message)[:2000], request)
            if isinstance(message, str)
            else "the executor reported a failure",
            details=scrub_details(
                error.get("details") if isinstance(error.get("details"), dict) else {},
                lambda text: self._redact(text, request),
            ),
            retryable=bool(error.get("retryable")) and request.contract.read_only,
            call_id=request.context.call_id,
            run_id=request.context.run_id,
        )

    def _err(
        self,
        cls: type[Failure],
        request: ExecutionRequest,
        message: str,
        reason: str,
        *,
        details: Mapping[str, Any] | None = None,
        retryable: bool = False,
    ) -> Failure:
        return cls(
            self._redact(message, request),
            reason=reason,
            details=details,
            retryable=retryable,
            call_id=request.context.call_id,
            run_id=request.context.run_id,
        )

    # -----------------------------------------------------------------------------------
    # transport

    def _headers(
        self, endpoint: HttpEndpoint, method: str, url: str, body: bytes
    ) -> dict[str, str]:
        headers = signed_headers(
            credential=endpoint.credential,
            signing_key=endpoint.signing_key,
            method=method,
            path=httpx2.URL(url).raw_path.decode("ascii").split("?", 1)[0],
            body=body,
            now=self._clock(),
        )
        headers["Accept"] = "application/json"
        if body:
            headers["Content-Type"] = "application/json"
        return headers

    async def _send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        endpoint: HttpEndpoint,
        sent: _Sent,
    ) -> tuple[int, bytes]:
        """Send one request; read at most ``max_response_bytes`` of the answer.

        The request is a CLIENT span of the current trace, whose context travels to the
        executor in the W3C ``traceparent`` header."""
        operation = url.rstrip("/").rsplit("/", 1)[-1]
        with telemetry.span(
            f"{method} {operation}",
            {"http.request.method": method, "url.full": url},
            kind=SpanKind.CLIENT,
        ) as span:
            traced = dict(headers)
            telemetry.inject(traced)
            status, payload = await self._exchange(method, url, traced, body, endpoint, sent)
            span.set_attribute("http.response.status_code", status)
            return status, payload

    async def _exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        endpoint: HttpEndpoint,
        sent: _Sent,
    ) -> tuple[int, bytes]:
        request = self._client.build_request(
            method,
            url,
            headers=headers,
            content=body if body else None,
            extensions={"trace": sent},
            timeout=httpx2.Timeout(None),  # the caller's deadline bounds the whole exchange
        )
        response = await self._client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length")
            if (
                declared is not None
                and declared.isdigit()
                and int(declared) > endpoint.max_response_bytes
            ):
                raise _TooLarge
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > endpoint.max_response_bytes:
                    raise _TooLarge
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)
        finally:
            await response.aclose()


def _parse_describe(body: bytes, url: str) -> Described:
    def invalid(what: str) -> ContractViolation:
        return ContractViolation(
            f"the executor at {url} sent an invalid describe document: {what}",
            reason=DESCRIBE_INVALID,
        )

    try:
        doc = loads_strict(body)
    except StrictJSONError:
        raise invalid("not JSON") from None
    if not isinstance(doc, dict):
        raise invalid("not an object")
    if doc.get("protocol") != PROTOCOL:
        raise invalid(f"protocol is not {PROTOCOL}")
    executor = doc.get("executor")
    if not isinstance(executor, dict):
        raise invalid("no executor {name, version}")
    name, version = executor.get("name"), executor.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise invalid("executor name and version must be strings")
    tools = doc.get("tools")
    if not isinstance(tools, list):
        raise invalid("tools must be a list")
    found: dict[str, DescribedTool] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("id", "version", "contract_digest")
        ):
            raise invalid(f"tools[{index}] needs string id, version and contract_digest")
        found[item["id"]] = DescribedTool(
            id=item["id"], version=item["version"], contract_digest=item["contract_digest"]
        )
    return Described(name=name, version=version, tools=found)
