"""The remote HTTP executor: the client side of ``charter.executor.v1`` (DESIGN §6).

Each bound tool names an endpoint (base URL, bearer credential, signing key, timeout). A call
is one signed ``POST {url}/execute``; readiness is one signed ``GET {url}/describe``. The
answer is translated into the kernel's terms — honestly about whether an effect may have
happened.

Every answer must carry a valid response signature (``http_protocol.response_signature``)
over this call's id, idempotency key, contract digest and request nonce; an answer that does
not, or that is otherwise unreadable after the request was sent, leaves a write's effect in
doubt. :func:`charter.kernel.executor_port.in_doubt` decides per effect: ``failed`` for a read
tool, ``unknown`` for any other effect.

- nothing sent (refused, DNS, pool): ``failed``, not dispatched, ``EXECUTOR_UNREACHABLE``;
- a signed 3xx (never followed) or 4xx: ``failed``, not dispatched (``EXECUTOR_REDIRECT``,
  the executor's reason, else ``EXECUTOR_REFUSED``);
- in doubt — a 5xx, no or a wrong signature (``RESPONSE_UNSIGNED`` /
  ``RESPONSE_SIGNATURE_INVALID``), another call id (``CALL_ID_MISMATCH``), a
  Content-Encoding (``EXECUTOR_CONTENT_ENCODING``), over the size cap
  (``RESPONSE_TOO_LARGE``), malformed (``EXECUTOR_MALFORMED_RESPONSE``), a non-JSON result:
  ``failed`` for a read tool, ``unknown`` for any other effect;
- the deadline passed or the connection broke after sending: ``unknown``
  (``TIMEOUT`` / ``EXECUTOR_CONNECTION_LOST``);
- signed ``{status: failed, error}``: ``failed`` with the executor's code and reason;
- signed ``{status: succeeded, result}``: ``succeeded`` (the kernel then checks the result
  schema — a mismatch is again ``failed`` for a read tool, ``unknown`` otherwise).

Addresses are pinned: each endpoint's host name is resolved when readiness describes it (once
per readiness period) and every request goes to that address — never resolved again per
connection — with the name kept in the ``Host`` header and, for ``https``, as the TLS server
name (the certificate is still checked against the name — and against the endpoint's own
``ca`` when it has one, else ``verify``; each TLS server name and trust has its own
connection pool, so a connection verified for one name or CA is never reused for another
pinned to the same address). Every resolved address passes the
deployment's egress policy first (:mod:`charter.executors.egress`); a refused one is never
connected to (``EGRESS_REFUSED``). A resolution that changed is taken only after a describe
over the new address verified (it is signed with the binding's key), and the report says
where it moved from. Redirects are never followed.

The protocol makes 3xx and 4xx safe to read as "not executed": a conforming executor answers
them only before running anything (``docs/executors.md``). Nothing here retries; the kernel
retries read-only idempotent tools itself.
"""

from __future__ import annotations

import contextlib
import logging
import re
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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
from charter.executors.egress import (
    EGRESS_REFUSED,
    EgressPolicy,
    Resolver,
    allowed_address,
    connect_failure,
    system_resolver,
)
from charter.executors.http_describe import (
    DESCRIBE_INVALID,
    Described,
    DescribedTool,
    parse_describe,
)
from charter.executors.http_protocol import (
    AUTH_INVALID,
    NONCE_HEADER,
    RESPONSE_SIGNATURE_HEADER,
    SIGNATURE_INVALID,
    TIMESTAMP_STALE,
    StrictJSONError,
    answer_signature_matches,
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
    in_doubt,
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
RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
RESPONSE_UNSIGNED = "RESPONSE_UNSIGNED"
RESPONSE_SIGNATURE_INVALID = "RESPONSE_SIGNATURE_INVALID"
EXECUTOR_CONTENT_ENCODING = "EXECUTOR_CONTENT_ENCODING"
CONTRACT_MISMATCH = "CONTRACT_MISMATCH"  # the executor's 409: it serves another contract
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DESCRIBE_TIMEOUT_S = 5.0
LOG = logging.getLogger("charter.executors.http")


__all__ = [
    "EGRESS_REFUSED",
    "RESULT_TOO_LARGE",
    "Described",
    "DescribedTool",
    "HttpEndpoint",
    "HttpExecutor",
    "Resolver",
    "system_resolver",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpEndpoint:
    """Where one tool's executor lives and how to authenticate to it."""

    url: str  # base URL; the client appends /describe and /execute
    credential: bytes = field(repr=False)  # sent as the bearer token
    signing_key: bytes = field(repr=False)  # keys the request signature; never sent
    timeout_s: float | None = None  # caps the contract's timeout for this binding
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    # https: PEM certificates that alone are trusted for this endpoint (a private CA);
    # None: the executor's ``verify``
    ca: str | None = field(default=None, repr=False)

    def endpoint(self, name: str) -> str:
        return self.url.rstrip("/") + "/" + name


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


@dataclass(frozen=True, slots=True, kw_only=True)
class _Answer:
    """One HTTP answer as read off the wire (at most ``max_response_bytes`` of body)."""

    status: int
    body: bytes
    signature: str | None
    encoding: str | None  # the Content-Encoding header, if any


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
        egress: EgressPolicy | None = None,
        resolver: Resolver | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        """``transport`` serves plain ``http`` endpoints (a test seam); ``https`` ones get a
        client per TLS server name and trust, whose certificates are checked against the
        endpoint's ``ca`` when it has one, else with ``verify``."""
        self._endpoints = dict(endpoints)
        self._redact = redact_message
        self._clock = clock
        self.egress = egress if egress is not None else EgressPolicy()
        self.resolver: Resolver = resolver or system_resolver
        self._pins: dict[str, str] = {}  # base URL -> the address requests go to
        # Told the base URL of an executor that answered for another contract (a signed 409
        # CONTRACT_MISMATCH), so readiness re-describes it before the next call.
        self.on_mismatch: Any = None
        self._verify = verify
        self._client = self._new_client(transport)
        # https: one client (one connection pool) per TLS server name and trust (the
        # endpoint's CA, or None). Requests go to the pinned address, and a pool matches
        # connections by address: shared, a connection verified for one name (or against one
        # CA) would carry another name's (another binding's) requests unverified.
        self._tls_clients: dict[tuple[str, str | None], httpx2.AsyncClient] = {}

    @property
    def endpoints(self) -> Mapping[str, HttpEndpoint]:
        return self._endpoints

    @staticmethod
    def _new_client(transport: httpx2.AsyncBaseTransport | None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            follow_redirects=False,
            transport=transport,
            trust_env=False,  # never route executor traffic through a proxy from the env
            limits=httpx2.Limits(keepalive_expiry=2.0),  # below uvicorn's 5 s idle close
            timeout=httpx2.Timeout(DESCRIBE_TIMEOUT_S),
        )

    def _client_for(self, named: httpx2.URL, endpoint: HttpEndpoint) -> httpx2.AsyncClient:
        """The client for a request to ``named``: for https, the pool of its server name and
        the endpoint's trust (its own CA, else ``verify``)."""
        if named.scheme != "https":
            return self._client
        key = (named.host, endpoint.ca)
        client = self._tls_clients.get(key)
        if client is None:
            verify = self._verify
            if endpoint.ca is not None:  # trust these authorities only, not the system's
                verify = ssl.create_default_context(cadata=endpoint.ca)
            transport = httpx2.AsyncHTTPTransport(
                verify=verify, trust_env=False, limits=httpx2.Limits(keepalive_expiry=2.0)
            )
            client = self._tls_clients[key] = self._new_client(transport)
        return client

    async def aclose(self) -> None:
        for client in (self._client, *self._tls_clients.values()):
            await client.aclose()

    def pinned(self, url: str) -> str | None:
        """The address requests to the executor at ``url`` go to (``None``: not yet)."""
        return self._pins.get(url)

    async def _address(self, endpoint: HttpEndpoint, *, repin: bool) -> str:
        """The pinned address, or (``repin``, or none yet) a fresh resolution that the egress
        policy allows; raises a :class:`Failure` when it cannot be resolved or is refused."""
        pinned = self._pins.get(endpoint.url)
        if pinned is not None and not repin:
            return pinned
        try:
            address = await allowed_address(endpoint.url, self.egress, self.resolver)
        except Failure as exc:
            exc.message = f"the executor at {endpoint.url}: {exc.message}"
            raise
        if pinned is None and not repin:
            self._pins[endpoint.url] = address
        return address

    # -----------------------------------------------------------------------------------
    # describe

    async def describe(
        self, endpoint: HttpEndpoint, *, timeout_s: float = DESCRIBE_TIMEOUT_S
    ) -> Described:
        """``GET /describe``; raises a :class:`Failure` whose reason says what went wrong."""
        url = endpoint.endpoint("describe")
        headers = self._headers(endpoint, "GET", url, b"")
        try:
            with anyio.fail_after(timeout_s):  # a silent DNS server too
                address = await self._address(endpoint, repin=True)
                answer = await self._send("GET", url, headers, b"", endpoint, _Sent(), address)
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
                f"the executor at {endpoint.url} is unreachable: {connect_failure(exc)}",
                reason=EXECUTOR_UNREACHABLE,
            ) from None
        status = answer.status
        if status in (401, 403):
            said = _signed_refusal(endpoint, answer, headers[NONCE_HEADER])
            raise PermissionDenied(
                f"the executor at {endpoint.url} refused our credentials (HTTP {status})"
                + (f": {said}" if said else ""),
                reason=EXECUTOR_REFUSED,
                details={"executor_reason": said.split(" ", 1)[0]} if said else None,
            )
        if status != 200:
            raise TransientExternal(
                f"the executor at {endpoint.url} answered describe with HTTP {status}",
                reason=EXECUTOR_UNREACHABLE,
            )
        if not answer_signature_matches(
            endpoint.signing_key,
            answer.signature,
            status=status,
            call_id="",
            idempotency_key="",
            contract_digest="",
            nonce=headers[NONCE_HEADER],
            body=answer.body,
        ):
            raise ContractViolation(
                f"the executor at {endpoint.url} sent a describe document without a valid "
                "response signature (is something else answering on its address?)",
                reason=RESPONSE_UNSIGNED if not answer.signature else RESPONSE_SIGNATURE_INVALID,
            )
        if answer.encoding is not None:
            raise ContractViolation(
                f"the executor at {endpoint.url} sent describe with Content-Encoding "
                f"{answer.encoding[:40]!r}",
                reason=DESCRIBE_INVALID,
            )
        described = parse_describe(answer.body, endpoint.url)
        previous = self._pins.get(endpoint.url)
        self._pins[endpoint.url] = address
        if previous is not None and previous != address:
            LOG.warning(
                "the executor at %s moved from %s to %s (pinned after a signed describe)",
                endpoint.url,
                previous,
                address,
            )
        moved = previous if previous is not None and previous != address else None
        return replace(described, address=address, previous_address=moved)

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
                    # a delegating tool passes it back on the calls it makes (docs/kernel.md)
                    "span_id": ctx.span_id,
                },
            }
        )
        url = endpoint.endpoint("execute")
        try:
            address = await self._address(endpoint, repin=False)
        except Failure as exc:
            exc.call_id, exc.run_id = ctx.call_id, ctx.run_id
            return failed(exc, dispatched=False)
        headers = self._headers(endpoint, "POST", url, body)
        headers["Idempotency-Key"] = ctx.idempotency_key
        sent = _Sent()
        try:
            with anyio.fail_after(deadline):
                answer = await self._send("POST", url, headers, body, endpoint, sent, address)
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
            return self._doubt(
                request,
                f"the executor's answer exceeded {endpoint.max_response_bytes} bytes",
                RESPONSE_TOO_LARGE,
            )
        except httpx2.HTTPError as exc:
            if not sent.sent:
                return self._not_sent(request, endpoint, connect_failure(exc))
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
        return self._answer(request, endpoint, headers[NONCE_HEADER], answer)

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

    def _answer(
        self, request: ExecutionRequest, endpoint: HttpEndpoint, nonce: str, answer: _Answer
    ) -> ExecutionOutcome:
        contract = request.contract
        ctx = request.context
        status, payload = answer.status, answer.body
        if not answer_signature_matches(
            endpoint.signing_key,
            answer.signature,
            status=status,
            call_id=ctx.call_id,
            idempotency_key=ctx.idempotency_key,
            contract_digest=contract.digest,
            nonce=nonce,
            body=payload,
        ):
            return self._unverified(request, endpoint, answer)
        if answer.encoding is not None:
            return self._doubt(
                request,
                f"the executor's answer has Content-Encoding {answer.encoding[:40]!r}; "
                "only identity is accepted",
                EXECUTOR_CONTENT_ENCODING,
            )
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
            refusal = self._refusal(request, status, payload)
            if refusal.reason == CONTRACT_MISMATCH and self.on_mismatch is not None:
                self.on_mismatch(endpoint.url)
            return failed(refusal, dispatched=False)
        if status >= 500 or status < 200:
            doubt = "" if contract.read_only else "; its effect may or may not have happened"
            error = self._err(
                TransientExternal,
                request,
                f"the executor answered HTTP {status} for tool {contract.id}{doubt}",
                EXECUTOR_ERROR,
                details={"http_status": status},
                retryable=contract.read_only,
            )
            return in_doubt(error, read_only=contract.read_only)
        try:
            doc = loads_strict(payload)
        except StrictJSONError:
            return self._malformed(request, "the executor's answer is not valid JSON")
        if not isinstance(doc, dict):
            return self._malformed(request, "the executor's answer is not a JSON object")
        if doc.get("call_id") != ctx.call_id:
            return self._doubt(
                request, "the executor answered for another call id", CALL_ID_MISMATCH
            )
        outcome = doc.get("status")
        if outcome == "succeeded" and "result" in doc:
            try:
                return succeeded(ensure_json(doc["result"]))
            except Failure as exc:
                exc.call_id, exc.run_id = ctx.call_id, ctx.run_id
                return in_doubt(exc, read_only=contract.read_only)
        if outcome == "failed" and isinstance(doc.get("error"), dict):
            return failed(self._reported(request, doc["error"]))
        return self._malformed(request, "the executor's answer has no valid status")

    def _unverified(
        self, request: ExecutionRequest, endpoint: HttpEndpoint, answer: _Answer
    ) -> ExecutionOutcome:
        """An answer whose signature does not verify: nothing in it is believed, and readiness
        checks this executor again before the next call (another key, or an impostor)."""
        if self.on_mismatch is not None:
            self.on_mismatch(endpoint.url)
        if not answer.signature:
            return self._doubt(
                request,
                f"the answer (HTTP {answer.status}) carries no response signature; something "
                "other than the executor may have answered",
                RESPONSE_UNSIGNED,
                details={"http_status": answer.status},
            )
        other = None
        with_id = None
        with contextlib.suppress(StrictJSONError):
            with_id = loads_strict(answer.body)
        if isinstance(with_id, dict) and isinstance(with_id.get("call_id"), str):
            other = with_id["call_id"] != request.context.call_id
        if other:
            return self._doubt(
                request,
                "the executor answered for another call id",
                CALL_ID_MISMATCH,
                details={"http_status": answer.status},
            )
        return self._doubt(
            request,
            f"the answer's response signature (HTTP {answer.status}) does not verify for this "
            "call, key and contract digest",
            RESPONSE_SIGNATURE_INVALID,
            details={"http_status": answer.status},
        )

    def _doubt(
        self,
        request: ExecutionRequest,
        message: str,
        reason: str,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> ExecutionOutcome:
        """After sending: an answer that cannot be believed or read (see :func:`in_doubt`)."""
        read_only = request.contract.read_only
        if not read_only:
            message += f"; the effect of tool {request.contract.id} may or may not have happened"
        error = self._err(ContractViolation, request, message, reason, details=details)
        return in_doubt(error, read_only=read_only)

    def _malformed(self, request: ExecutionRequest, message: str) -> ExecutionOutcome:
        return self._doubt(request, message, EXECUTOR_MALFORMED_RESPONSE)

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
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
        try:  # bounded depth: scrubbing details nested hundreds deep would overflow the stack
            details = ensure_json(details)
        except Failure:
            details = {}
        return failure_from(
            code if isinstance(code, str) and code in valid_codes else default_code,
            reason if isinstance(reason, str) and _REASON.fullmatch(reason) else "EXECUTOR_FAILED",
            self._redact(str(message)[:2000], request)
            if isinstance(message, str)
            else "the executor reported a failure",
            details=scrub_details(details, lambda text: self._redact(text, request)),
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
        headers["Accept-Encoding"] = "identity"
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
        address: str,
    ) -> _Answer:
        """Send one request to ``address`` (the pinned one; the name stays in ``Host`` and,
        for https, the TLS server name); read at most ``max_response_bytes`` of the answer
        (raw bytes: nothing is decompressed, so a Content-Encoding is seen, not trusted).

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
            answer = await self._exchange(method, url, traced, body, endpoint, sent, address)
            span.set_attribute("http.response.status_code", answer.status)
            return answer

    async def _exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        endpoint: HttpEndpoint,
        sent: _Sent,
        address: str,
    ) -> _Answer:
        named = httpx2.URL(url)
        extensions: dict[str, Any] = {"trace": sent}
        if named.scheme == "https":
            extensions["sni_hostname"] = named.host
        client = self._client_for(named, endpoint)
        request = client.build_request(
            method,
            named.copy_with(host=address),
            headers={**headers, "Host": named.netloc.decode("ascii")},
            content=body if body else None,
            extensions=extensions,
            timeout=httpx2.Timeout(None),  # the caller's deadline bounds the whole exchange
        )
        response = await client.send(request, stream=True)
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
            encoding = response.headers.get("content-encoding")
            if encoding is not None and encoding.strip().lower() in ("", "identity"):
                encoding = None
            return _Answer(
                status=response.status_code,
                body=b"".join(chunks),
                signature=response.headers.get(RESPONSE_SIGNATURE_HEADER),
                encoding=encoding,
            )
        finally:
            await response.aclose()


def _signed_refusal(endpoint: HttpEndpoint, answer: _Answer, nonce: str) -> str | None:
    """The reason of a describe refusal the executor signed (only the upper-case code: its
    text is not echoed) with what it means, so the operator is told whether the clocks, the
    signing key (or a proxy that rewrote the path) or the credential is wrong; ``None`` if
    unsigned or unreadable."""
    if not answer_signature_matches(
        endpoint.signing_key,
        answer.signature,
        status=answer.status,
        call_id="",
        idempotency_key="",
        contract_digest="",
        nonce=nonce,
        body=answer.body,
    ):
        return None
    with contextlib.suppress(StrictJSONError):
        doc = loads_strict(answer.body)
        error = doc.get("error") if isinstance(doc, dict) else None
        reason = error.get("reason") if isinstance(error, dict) else None
        if isinstance(reason, str) and _REASON.fullmatch(reason):
            return reason + _REFUSAL_HINTS.get(reason, "")
    return None


_REASON = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
"""An executor-reported reason Charter keeps: an upper-case code (anything else, spaces or
newlines included, becomes EXECUTOR_FAILED: a reason is a code, the message is the text)."""

_REFUSAL_HINTS = {
    TIMESTAMP_STALE: " (the clocks of Charter and the executor differ beyond its tolerance)",
    SIGNATURE_INVALID: " (another signing key, or a proxy that changed the request's path)",
    AUTH_INVALID: " (another bearer credential)",
}
