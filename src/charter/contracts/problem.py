"""The problem document every HTTP error answer of Charter carries (RFC 9457).

One shape for the ``/v1`` API (:mod:`charter.server.problems`) and the MCP endpoints'
HTTP-level refusals (:mod:`charter.mcp._http`: no credential, an unknown profile), and the
rules every HTTP surface of Charter — those two and a remote executor (:mod:`charter.remote`)
— applies to a request body's ``Content-Encoding`` (:func:`content_coding_refused`) and
``Content-Type`` (:func:`json_type_refused`)::

    {"type": "urn:charter:problem:AUTH_MISSING", "title": "Unauthorized", "status": 401,
     "detail": "send Authorization: Bearer <credential>", "code": "permission_denied",
     "reason": "AUTH_MISSING", "retryable": false}

``code`` is one of the seven error codes and ``reason`` the fine-grained upper-case reason.
``detail`` is written by Charter and never holds what the client sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from charter.contracts.text import shown
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


JSON = "application/json"
ACCEPT_JSON = {"Accept": JSON}
"""The header of a ``415`` for a body not sent as JSON (RFC 9110 §15.5.16)."""
# RFC 6838 restricted names: application/json, or a structured syntax suffix +json
_JSON_TYPE = re.compile(r"application/(?:[a-z0-9][a-z0-9!#$&^_.+-]*\+)?json")


def json_type_refused(content_type: str | None) -> str | None:
    """Why a body with this ``Content-Type`` is not taken as JSON — ``415
    UNSUPPORTED_MEDIA_TYPE`` with :data:`ACCEPT_JSON` — or None when it is: ``application/json``
    or ``application/<name>+json``, with no ``charset`` but ``utf-8`` (RFC 8259: JSON is
    UTF-8). A missing type is refused here; a route that reads a body with no type claimed as
    JSON does not ask."""
    if content_type is None or not content_type.strip():
        return f"the request has no Content-Type; send the body as {JSON}"
    essence, _, parameters = content_type.partition(";")
    essence = essence.strip().lower()
    if not _JSON_TYPE.fullmatch(essence):
        return f"the body must be {JSON}, not {shown(essence)}"
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset != "utf-8":
            return f"the body must be UTF-8 JSON, not charset {shown(charset)}"
    return None
