"""``application/problem+json`` answers (RFC 9457) carrying Charter's code and reason.

Every error the HTTP API answers — authentication, a malformed body, a missing resource, a
refused approval — is one problem document::

    {"type": "urn:charter:problem:CONTEXT_NOT_FOUND", "title": "Not Found", "status": 404,
     "detail": "no such context", "code": "permission_denied",
     "reason": "CONTEXT_NOT_FOUND", "retryable": false}

``code`` is one of the seven error codes and ``reason`` the fine-grained upper-case reason,
exactly as the library raises them, so :mod:`charter.client` rebuilds the same exception. A
resource of another tenant answers exactly like a missing one (404, the same reason). The
document itself is built by :func:`charter.contracts.problem.problem_body`, which the MCP
endpoints share.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from starlette.responses import JSONResponse

from charter.contracts.problem import PROBLEM_MEDIA_TYPE, problem_body
from charter.errors import ErrorCode, Failure
from charter.kernel.limits import retry_after_header
from charter.kernel.redaction import Redactor

STATUS_BY_CODE: dict[ErrorCode, int] = {
    ErrorCode.INVALID_INPUT: 422,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.TRANSIENT_EXTERNAL: 503,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.RESOURCE_LIMIT: 422,
    ErrorCode.CONTRACT_VIOLATION: 502,
    ErrorCode.INTERNAL: 500,
}

STATUS_BY_REASON: dict[str, int] = {
    "AUTH_MISSING": 401,
    "AUTH_INVALID": 401,
    "AUTH_TOKEN_EXPIRED": 401,
    "AUTH_TOKEN_NOT_YET_VALID": 401,
    "AUTH_AUDIENCE": 401,
    "AUTH_ISSUER": 401,
    "AUTH_UNKNOWN_SUBJECT": 401,
    "CONTEXT_NOT_FOUND": 404,
    "CALL_NOT_FOUND": 404,
    "RUN_NOT_FOUND": 404,
    "TASK_NOT_FOUND": 404,
    "APPROVAL_NOT_FOUND": 404,
    "ARTIFACT_NOT_FOUND": 404,
    "ARTIFACT_TOO_LARGE": 413,
    "ROUTE_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "NOT_ACCEPTABLE": 406,
    "APPROVAL_NOT_PENDING": 409,
    "RUN_TERMINAL": 409,
    "ILLEGAL_TRANSITION": 409,
    "RUN_BUSY": 409,
    "TASK_BUSY": 409,
    "CALL_ID_AMBIGUOUS": 409,
    "BODY_TOO_LARGE": 413,
    "BODY_TIMEOUT": 408,
    "URL_TOO_LONG": 414,  # these four are answered by the HTTP layer (server/http_head.py)
    "HEADERS_TOO_LARGE": 431,
    "HEADERS_TIMEOUT": 408,
    "REQUEST_MALFORMED": 400,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "BODY_MALFORMED": 400,
    "ARTIFACT_STORE_FULL": 507,  # the disk holding the artifact store is full
    "STORE_DISK_FULL": 507,
    "TOO_MANY_STREAMS": 429,  # limits.streams (server/streams.py), with Retry-After
}


class Problem(BaseModel):
    """The problem document (the OpenAPI schema of every error answer)."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    reason: str
    retryable: bool = False
    errors: list[dict[str, Any]] | None = None


def status_for(code: ErrorCode, reason: str) -> int:
    return STATUS_BY_REASON.get(reason, STATUS_BY_CODE[code])


def problem_response(
    *,
    code: ErrorCode,
    reason: str,
    detail: str,
    status: int | None = None,
    retryable: bool = False,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    status = status or status_for(code, reason)
    return JSONResponse(
        problem_body(
            status=status,
            code=code,
            reason=reason,
            detail=detail,
            retryable=retryable,
            errors=errors,
        ),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def failure_response(
    exc: Failure, *, headers: dict[str, str] | None = None, redactor: Redactor | None = None
) -> JSONResponse:
    """The problem answer for a Charter failure, its message passed through ``redactor``
    (the deployment's: a message may quote a name the client sent)."""
    if exc.reason.startswith("AUTH_"):
        headers = {**(headers or {}), "WWW-Authenticate": 'Bearer realm="charter"'}
    retry = retry_after_of(exc)
    if retry is not None:
        headers = {**(headers or {}), "Retry-After": retry}
    return problem_response(
        code=exc.code,
        reason=exc.reason,
        detail=exc.message if redactor is None else redactor.redact_text(exc.message),
        retryable=exc.retryable,
        headers=headers,
    )


def retry_after_of(exc: Failure) -> str | None:
    """``Retry-After`` (whole seconds, at least 1) for a 429 failure that says when to come
    back (``details.retry_after``), else ``None``."""
    seconds = exc.details.get("retry_after") if exc.details else None
    if status_for(exc.code, exc.reason) != 429 or not isinstance(seconds, int | float):
        return None
    return retry_after_header(seconds)


def problem_schema_ref() -> dict[str, Any]:
    return {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for problem answers with these statuses."""
    return {
        status: {"description": HTTPStatus(status).phrase, "content": problem_schema_ref()}
        for status in statuses
    }
