"""The wire format of ``charter.executor.v1``, shared by the client and the executor helper.

Standard library only, so the client side (:mod:`charter.executors.http`) needs no server
dependency and the executor side (:mod:`charter.remote`) signs and verifies exactly the
same bytes. ``docs/executors.md`` is the reference.

Every request carries::

    Authorization: Bearer <credential>
    X-Charter-Timestamp: <unix seconds, integer>
    X-Charter-Nonce: <32 hex digits, fresh per request>
    X-Charter-Signature: v1=<hex HMAC-SHA256(signing_key, string_to_sign)>

where ``string_to_sign`` is the UTF-8 of::

    "charter.executor.v1" "\\n" METHOD "\\n" PATH "\\n" TIMESTAMP "\\n" NONCE "\\n" sha256hex(body)

``PATH`` is the request path as sent (the base URL's path plus ``/describe`` or
``/execute``, no query). The executor refuses a timestamp outside its tolerance window and a
nonce it has already seen inside that window (a replay).

Every response carries ``X-Charter-Response-Signature: v1=<hex HMAC-SHA256(signing_key,
response_to_sign)>`` where ``response_to_sign`` is the UTF-8 of::

    "charter.executor.v1.response" "\n" HTTP_STATUS "\n" CALL_ID "\n" IDEMPOTENCY_KEY "\n"
    CONTRACT_DIGEST "\n" NONCE "\n" sha256hex(body)

``CALL_ID``, ``IDEMPOTENCY_KEY`` and ``CONTRACT_DIGEST`` are those of the request
(``tool.contract_digest``), empty for ``/describe`` and for a refusal of a body the executor
did not read; ``NONCE`` is the request's nonce. The client verifies it before reading
anything in the answer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from typing import Any

PROTOCOL = "charter.executor.v1"
TIMESTAMP_HEADER = "X-Charter-Timestamp"
NONCE_HEADER = "X-Charter-Nonce"
SIGNATURE_HEADER = "X-Charter-Signature"
SIGNATURE_VERSION = "v1"
RESPONSE_SIGNATURE_HEADER = "X-Charter-Response-Signature"
RESPONSE_PURPOSE = "charter.executor.v1.response"
DEFAULT_TOLERANCE_S = 300
NONCE_HEX_CHARS = 32

# Reasons the executor side answers with (HTTP 4xx bodies) and the client side reports.
AUTH_MISSING = "EXECUTOR_AUTH_MISSING"
AUTH_INVALID = "EXECUTOR_AUTH_INVALID"
SIGNATURE_INVALID = "SIGNATURE_INVALID"
TIMESTAMP_STALE = "TIMESTAMP_STALE"
REPLAYED = "REQUEST_REPLAYED"


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def string_to_sign(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> bytes:
    return "\n".join((PROTOCOL, method.upper(), path, timestamp, nonce, body_digest(body))).encode(
        "utf-8"
    )


def signature(key: bytes, method: str, path: str, timestamp: str, nonce: str, body: bytes) -> str:
    """``v1=<hex>``: the value of the signature header."""
    mac = hmac.new(key, string_to_sign(method, path, timestamp, nonce, body), hashlib.sha256)
    return f"{SIGNATURE_VERSION}={mac.hexdigest()}"


def signed_headers(
    *, credential: bytes, signing_key: bytes, method: str, path: str, body: bytes, now: float
) -> dict[str, str]:
    """The four headers of one request (a fresh nonce each time)."""
    timestamp = str(int(now))
    nonce = secrets.token_hex(NONCE_HEX_CHARS // 2)
    return {
        "Authorization": "Bearer " + credential.decode("utf-8", "surrogateescape"),
        TIMESTAMP_HEADER: timestamp,
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: signature(signing_key, method, path, timestamp, nonce, body),
    }


def signature_matches(
    key: bytes, offered: str, method: str, path: str, timestamp: str, nonce: str, body: bytes
) -> bool:
    """Constant-time comparison of an offered ``v1=<hex>`` with the expected one."""
    expected = signature(key, method, path, timestamp, nonce, body)
    return hmac.compare_digest(offered.encode("utf-8", "replace"), expected.encode("ascii"))


def response_to_sign(
    *,
    status: int,
    call_id: str,
    idempotency_key: str,
    contract_digest: str,
    nonce: str,
    body: bytes,
) -> bytes:
    """The bytes a response signature covers (see the module docstring)."""
    fields = (
        RESPONSE_PURPOSE,
        str(int(status)),
        call_id,
        idempotency_key,
        contract_digest,
        nonce,
        body_digest(body),
    )
    return "\n".join(fields).encode("utf-8", "surrogateescape")


def response_signature(
    key: bytes,
    *,
    status: int,
    call_id: str,
    idempotency_key: str,
    contract_digest: str,
    nonce: str,
    body: bytes,
) -> str:
    """``v1=<hex>``: the value of the response signature header."""
    message = response_to_sign(
        status=status,
        call_id=call_id,
        idempotency_key=idempotency_key,
        contract_digest=contract_digest,
        nonce=nonce,
        body=body,
    )
    return f"{SIGNATURE_VERSION}={hmac.new(key, message, hashlib.sha256).hexdigest()}"


def response_signature_matches(
    key: bytes,
    offered: str | None,
    *,
    status: int,
    call_id: str,
    idempotency_key: str,
    contract_digest: str,
    nonce: str,
    body: bytes,
) -> bool:
    """Constant-time check of a response's ``v1=<hex>`` signature (``None``: missing)."""
    if not offered:
        return False
    expected = response_signature(
        key,
        status=status,
        call_id=call_id,
        idempotency_key=idempotency_key,
        contract_digest=contract_digest,
        nonce=nonce,
        body=body,
    )
    return hmac.compare_digest(offered.encode("utf-8", "replace"), expected.encode("ascii"))


def answer_signature_matches(
    key: bytes,
    offered: str | None,
    *,
    status: int,
    call_id: str,
    idempotency_key: str,
    contract_digest: str,
    nonce: str,
    body: bytes,
) -> bool:
    """The client's check of an answer's signature: over the request's echoed fields — or,
    for a 4xx only, over empty ones, which an executor echoes when it did not read the body
    (a 413 before reading it). The nonce binds either to this one request, and a 4xx is
    answered before anything runs, so such a refusal is believed as one."""
    fields = [(call_id, idempotency_key, contract_digest)]
    if 400 <= status < 500 and any(fields[0]):
        fields.append(("", "", ""))
    return any(
        response_signature_matches(
            key,
            offered,
            status=status,
            call_id=c,
            idempotency_key=k,
            contract_digest=d,
            nonce=nonce,
            body=body,
        )
        for c, k, d in fields
    )


def timestamp_fresh(timestamp: str, now: float, tolerance_s: float) -> bool:
    """``timestamp`` is a decimal integer within ``tolerance_s`` of ``now`` either way."""
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return False
    return abs(int(timestamp) - now) <= tolerance_s


def nonce_valid(nonce: str) -> bool:
    return len(nonce) == NONCE_HEX_CHARS and all(c in "0123456789abcdef" for c in nonce)


class StrictJSONError(ValueError):
    """The text is not strict JSON (syntax, duplicate keys, NaN/Infinity, lone surrogates)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError("duplicate key in a JSON object")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError("a number out of range")
    return value


def loads_strict(data: bytes) -> Any:
    """Parse UTF-8 JSON strictly; raises :class:`StrictJSONError` on anything doubtful."""
    try:
        text = data.decode("utf-8")
        value = json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float
        )
        # Lone surrogates (\\ud800) survive json.loads; they are not valid Unicode text.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except StrictJSONError:
        raise
    except (UnicodeError, ValueError, RecursionError) as exc:
        raise StrictJSONError(type(exc).__name__) from None
    return value


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as both sides send it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )
