"""The problem document every HTTP error answer of Charter carries (RFC 9457).

One shape for the ``/v1`` API (:mod:`charter.server.problems`) and the MCP endpoints'
HTTP-level refusals (:mod:`charter.mcp._http`: no credential, an unknown profile)::

    {"type": "urn:charter:problem:AUTH_MISSING", "title": "Unauthorized", "status": 401,
     "detail": "send Authorization: Bearer <credential>", "code": "permission_denied",
     "reason": "AUTH_MISSING", "retryable": false}

``code`` is one of the seven error codes and ``reason`` the fine-grained upper-case reason.
``detail`` is written by Charter and never holds what the client sent.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from charter.errors import ErrorCode

PROBLEM_MEDIA_TYPE = "application/problem+json"


def problem_body(
    *,
    status: int,
    code: ErrorCode,
    reason: str,
    detail: str,
    retryable: bool = False,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The problem document for an answer with this ``status``."""
    body: dict[str, Any] = {
        "type": f"urn:charter:problem:{reason}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code.value,
        "reason": reason,
        "retryable": retryable,
    }
    if errors:
        body["errors"] = errors
    return body
