"""What the sync and async clients share: request bodies, answers, error translation.

No I/O here: both clients build the same requests and read answers the same way, so they
raise the same exceptions — Charter's own tree (:mod:`charter.errors`), never an HTTP
library's. A problem+json answer becomes the failure class of its ``code`` with the same
``reason``; a transport error becomes ``TransientExternal`` (``SERVER_UNREACHABLE``,
``SERVER_CONNECTION``) or ``TimeoutFailure`` (``SERVER_TIMEOUT``).
"""

from __future__ import annotations

import base64
import json
import mimetypes
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx2

from charter.contracts.delegation import PARENT_SPAN_HEADER, current_span
from charter.errors import (
    FAILURE_BY_CODE,
    ErrorCode,
    Failure,
    InternalFailure,
    InvalidInput,
    LedgerIntegrityError,
    TimeoutFailure,
    TransientExternal,
)
from charter.kernel.envelope import CallStatus, Envelope, Metrics

APPROVAL_TOKEN_HEADER = "X-Charter-Approval-Token"
TENANT_HEADER = "X-Charter-Tenant"
ENVELOPE_STATUSES = frozenset({200, 202, 403, 409, 422, 429, 503})


def check_api_key(key: str, *, name: str = "api_key") -> None:
    """Refuse an API key that cannot go in an ``Authorization`` header as it is (the key is
    never echoed): printable ASCII, no whitespace."""
    if not key or not all("!" <= ch <= "~" for ch in key):
        raise InvalidInput(
            f"{name}: an API key is printable ASCII without whitespace (the key is not shown)",
            reason="API_KEY_INVALID",
        )


def check_base_url(url: str, *, name: str = "base_url") -> None:
    """Refuse a server address that is not an ``http://`` or ``https://`` URL with a host."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        shown = f" {url!r}" if "@" not in url and url.isprintable() and len(url) <= 200 else ""
        raise InvalidInput(
            f"{name}{shown}: the server is an http:// or https:// URL (http://HOST:PORT)",
            reason="SERVER_URL_INVALID",
        )


@contextmanager
def translated() -> Iterator[None]:
    """Transport errors → Charter's exception tree."""
    try:
        yield
    except httpx2.TimeoutException as exc:
        raise TimeoutFailure(
            f"the server did not answer in time ({type(exc).__name__})",
            reason="SERVER_TIMEOUT",
            retryable=True,
        ) from None
    except httpx2.ConnectError:
        raise TransientExternal(
            "cannot connect to the server", reason="SERVER_UNREACHABLE", retryable=True
        ) from None
    except httpx2.TransportError as exc:
        raise TransientExternal(
            f"the connection to the server failed ({type(exc).__name__})",
            reason="SERVER_CONNECTION",
            retryable=True,
        ) from None


def failure_from(response: httpx2.Response) -> Failure:
    """The exception a non-success answer stands for."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("code"), str):
        try:
            cls = FAILURE_BY_CODE[ErrorCode(body["code"])]
        except ValueError:
            cls = FAILURE_BY_CODE[ErrorCode.INTERNAL]
        errors = body.get("errors")
        where = _locations(errors) if isinstance(errors, list) else ""
        return cls(
            str(body.get("detail", "")) + (f" ({where})" if where else ""),
            reason=str(body.get("reason") or cls.default_reason),
            retryable=bool(body.get("retryable", False)),
            details={"errors": errors} if where else None,
        )
    status = response.status_code
    if status >= 500:
        return TransientExternal(f"the server answered {status}", reason=f"HTTP_{status}")
    return InvalidInput(f"the server answered {status}", reason=f"HTTP_{status}")


def _locations(errors: list[Any]) -> str:
    """Where a ``REQUEST_INVALID`` problem found its mismatches, and what each is (the server
    names locations and the rule broken, never the offending value): ``body.message: String
    should have at least 1 character``."""
    parts = []
    for error in errors[:5]:
        if isinstance(error, Mapping) and isinstance(error.get("loc"), list):
            loc = ".".join(str(part) for part in error["loc"])
            parts.append(f"{loc}: {error.get('msg', '')}".rstrip(": "))
    return "; ".join(parts)


def check(response: httpx2.Response) -> Any:
    """The JSON body of a success, or the failure raised."""
    if response.status_code >= 400:
        raise failure_from(response)
    return response.json()


def call_headers(parent_span_id: str | None) -> dict[str, str]:
    """The headers of a call: JSON, and the delegating span it is made in, if any — given,
    or the one this code runs inside (a delegating tool served by :mod:`charter.remote`)."""
    headers = {"Content-Type": "application/json"}
    span = parent_span_id if parent_span_id is not None else current_span()
    if span is not None:
        headers[PARENT_SPAN_HEADER] = span
    return headers


def call_body(
    tool: str,
    call_id: str,
    arguments: str | bytes | Mapping[str, Any],
    approval_id: str | None,
    task_id: str | None = None,
) -> bytes:
    """A call body; text arguments travel verbatim (``arguments_json``) to the strict parser."""
    body: dict[str, Any] = {"tool": tool, "call_id": call_id}
    if isinstance(arguments, bytes):
        arguments = arguments.decode("utf-8", "surrogateescape")
    if isinstance(arguments, str):
        body["arguments_json"] = arguments
    else:
        body["arguments"] = dict(arguments)
    if approval_id is not None:
        body["approval_id"] = approval_id
    if task_id is not None:
        body["task_id"] = task_id
    return json.dumps(body, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


def envelope_from(response: httpx2.Response) -> Envelope:
    if response.status_code not in ENVELOPE_STATUSES or response.headers.get(
        "content-type", ""
    ).startswith("application/problem+json"):
        raise failure_from(response)
    try:
        d = response.json()
    except ValueError:
        d = None
    if not isinstance(d, Mapping) or "call_id" not in d:  # a 503 of a proxy, say
        raise failure_from(response)
    metrics = d.get("metrics") or {}
    return Envelope(
        call_id=d["call_id"],
        status=CallStatus(d["status"]),
        data=d.get("data"),
        artifact_ids=tuple(d.get("artifact_ids") or ()),
        warnings=tuple(d.get("warnings") or ()),
        error=d.get("error"),
        approval=d.get("approval"),
        metrics=Metrics(
            duration_ms=float(metrics.get("duration_ms", 0.0)),
            cached=bool(metrics.get("cached", False)),
            attempts=int(metrics.get("attempts", 0)),
            output_bytes=int(metrics.get("output_bytes", 0)),
        ),
        trace=d.get("trace"),
        context_id=d.get("context_id"),
        run_id=d.get("run_id"),
        tool=d.get("tool"),
    )


def context_body(
    profile: str,
    agent: str | None,
    objective: str | None,
    attachments: Sequence[tuple[str, str]],
    run_id: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"profile": profile}
    if agent is not None:
        body["agent"] = agent
    if objective is not None:
        body["objective"] = objective
    if attachments:
        body["attachments"] = [{"kind": k, "ref": r} for k, r in attachments]
    if run_id is not None:
        body["run"] = run_id
    return body


def run_body(
    session_id: str | None, workflow: str | None, inputs: Mapping[str, tuple[str, bytes]]
) -> dict[str, Any]:
    """``POST /v1/runs``: ad-hoc, or a catalog ``workflow`` with ``{TYPE: (path, data)}``."""
    body: dict[str, Any] = {}
    if session_id:
        body["session_id"] = session_id
    if workflow is not None:
        body["workflow"] = workflow
    if inputs:
        body["inputs"] = {
            typ: {
                "path": path,
                "media_type": mimetypes.guess_type(path)[0] or "application/octet-stream",
                "content_base64": base64.b64encode(data).decode("ascii"),
            }
            for typ, (path, data) in inputs.items()
        }
    return body


def decision(
    reason: str | None, token: str | None, tenant: str | None
) -> tuple[dict[str, Any], dict[str, str]]:
    body: dict[str, Any] = {}
    if reason is not None:
        body["reason"] = reason
    headers: dict[str, str] = {}
    if token is not None:
        headers[APPROVAL_TOKEN_HEADER] = token
        if tenant is not None:
            headers[TENANT_HEADER] = tenant
    return body, headers


def sse_event(sse: httpx2.ServerSentEvent) -> dict[str, Any] | None:
    """A ledger event from one SSE frame (``None`` for frames that are not events). The
    ``error`` frame is looked at first: SSE carries the last event id over to a frame that
    names none, so an error after events has an id too."""
    if sse.event == "error":
        data = json.loads(sse.data) if sse.data else {}
        raise LedgerIntegrityError(
            str(data.get("message", "the event stream failed")),
            reason=str(data.get("reason", "LEDGER_INTEGRITY")),
            seq=data.get("seq"),
        )
    if not sse.id or not sse.data:
        return None
    event = json.loads(sse.data)
    return event if isinstance(event, dict) else None


def chat_body(
    message: str,
    *,
    conversation_id: str | None = None,
    profile: str | None = None,
    agent: str | None = None,
    attachments: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if conversation_id is not None:
        body["conversationId"] = conversation_id
    if profile is not None:
        body["profile"] = profile
    if agent is not None:
        body["agent"] = agent
    if attachments:
        body["attachments"] = [{"kind": k, "ref": r} for k, r in attachments]
    return body


def chat_event(sse: httpx2.ServerSentEvent) -> dict[str, Any] | None:
    """A chat stream event ``{type, conversationId, sequence, timestamp, data}`` from one SSE
    frame (``None`` for comments and keep-alives). An ``error`` frame — the server could not
    go on (a stored event damaged: ``CONVERSATION_DAMAGED``) — is raised; it has no id of its
    own, but SSE carries the last id over to it."""
    if sse.event == "error":
        data = json.loads(sse.data) if sse.data else {}
        raise InternalFailure(
            str(data.get("message", "the chat stream failed")),
            reason=str(data.get("reason", "INTERNAL")),
            details={"sequence": data.get("sequence")},
        )
    if not sse.id or not sse.data:
        return None
    event = json.loads(sse.data)
    return event if isinstance(event, dict) else None
