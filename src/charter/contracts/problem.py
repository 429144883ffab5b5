"""The problem document every HTTP error answer of Charter carries (RFC 9457).

One shape for the ``/v1`` API (:mod:`charter.server.problems`) and the MCP endpoints'
HTTP-level refusals (:mod:`charter.mcp._http`: no credential, an unknown profile), and the one
rule both apply to a request body's ``Content-Encoding`` (:func:`content_coding_refused`)::

    {"type": "urn:charter:problem:AUTH_MISSING", "title": "Unauthorized", "status": 401,
     "detail": "send Authorization: Bearer <credential>", "code": "permission_denied",
     "reason": "AUTH_MISSING", "retryable": false}

``code`` is one of the seven error codes and ``reason`` the fine-grained upper-case reason.
``detail`` is written by Charter and never holds what the client sent.
"""

from __future__ import annotations

from collections.abc import Iterable
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


# The IANA HTTP Content Coding Registry: a refusal names these; anything else a client sent
# in the header is not echoed.
_REGISTERED_CODINGS = frozenset(
    {"aes128gcm", "br", "compress", "dcb", "dcz", "deflate", "exi", "gzip", "pack200-gzip",
     "x-compress", "x-gzip", "zstd"}
)  # fmt: skip
ACCEPT_IDENTITY = {"Accept-Encoding": "identity"}
"""The header of a ``415`` for a coded body (RFC 9110 §12.5.3: the codings accepted)."""


def content_coding_refused(values: Iterable[str]) -> str | None:
    """Why a request body with these ``Content-Encoding`` header values (every such header
    of the request) is refused — ``415 UNSUPPORTED_MEDIA_TYPE`` with :data:`ACCEPT_IDENTITY`
    (RFC 9110 §15.5.16) — or None when it names no coding but ``identity``. Charter
    decompresses nothing: compressed bytes read as JSON would be a misleading "not JSON"."""
    codings = [c.strip().lower() for value in values for c in value.split(",") if c.strip()]
    coded = [c for c in codings if c != "identity"]
    if not coded:
        return None
    named = (c if c in _REGISTERED_CODINGS else "a coding that is not registered" for c in coded)
    return (
        f"the body is encoded ({', '.join(dict.fromkeys(named))}): send it without a "
        "Content-Encoding (only identity is accepted)"
    )
