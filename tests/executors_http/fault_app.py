"""A scripted executor whose behaviour a test switches: ``POST /_control {"mode": ...}``.

The real ``charter.remote.app`` serves the tools and keeps its journal (``FAULT_JOURNAL``);
in a fault mode this wrapper misbehaves around it. Modes that say "after running" let the
real app run the tool first (the effect happens, the journal records it) and then spoil the
answer, as a broken proxy or a compromised executor would:

- ``/execute``: ``slow`` (0.3 s, then normal), ``hang``, ``500``, ``400`` (signed),
  ``echo_secrets`` (a signed 400 quoting the credential and signing key), ``loose_reason``
  (``rate_limited`` with a reason that is prose, not a code), ``rate_limited``
  (a signed ``status: failed`` / ``RATE_LIMITED`` with ``retry_after``),
  ``redirect`` (signed 307), ``oversized``; after running: ``malformed`` (a signed 200 with
  a broken body), ``wrong_call_id`` (a signed answer for another call), ``wrong_digest`` (the
  answer signed for another contract digest), ``unsigned`` (the
  signature removed), ``bad_signature`` (signed with another key), ``schema`` (a signed
  result that breaks the result schema), ``gzip`` (a signed gzip body), ``drop`` (the
  connection closed mid-body), ``late`` (the answer held until ``POST /_control
  {"release": true}``), ``deep_error`` (a signed ``status: failed`` whose error details nest
  600 levels deep);
- ``/describe``: ``digest`` (``shop.lookup`` reported with another digest), ``order_digest``
  / ``order_version`` (``shop.order`` reported with another digest / version);
- ``FAULT_BODY_TIMEOUT_S`` in the environment: the app's ``body_timeout_s``;
- ``v2``: everything is served by an app whose ``shop.order`` gained an optional parameter
  (``fault_tools_v2``; same version, another digest), sharing the journal.

``GET /_control`` reports the mode and the business effects counted by ``shop.order``.
Test-only: the control endpoint has no auth. Serve with
``uvicorn tests.executors_http.fault_app:app``.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from typing import Any

import anyio

import charter.remote
from charter.executors.http_protocol import (
    NONCE_HEADER,
    RESPONSE_SIGNATURE_HEADER,
    response_signature,
)
from tests.executors_http import fault_tools, fault_tools_v2

LIMITS: dict[str, Any] = {}
if "FAULT_BODY_TIMEOUT_S" in os.environ:  # the impatient executor of test_hostile_requests
    LIMITS["body_timeout_s"] = float(os.environ["FAULT_BODY_TIMEOUT_S"])
inner = charter.remote.app(
    [fault_tools.lookup, fault_tools.order],
    name="fault-executor",
    version="0.0.1",
    journal=os.environ["FAULT_JOURNAL"],
    **LIMITS,
)
inner_v2 = charter.remote.app(
    [fault_tools_v2.lookup, fault_tools_v2.order],
    name="fault-executor",
    version="0.0.2",
    journal=os.environ["FAULT_JOURNAL"],
)
SIGNING_KEY = os.environ["CHARTER_EXECUTOR_SIGNING_KEY"].encode()
STATE: dict[str, Any] = {"mode": "ok", "release": False, "held": 0}
AFTER_RUNNING = frozenset(
    {
        "malformed",
        "wrong_call_id",
        "wrong_digest",
        "unsigned",
        "bad_signature",
        "schema",
        "gzip",
        "drop",
        "late",
        "deep_error",
    }
)

Scope = dict[str, Any]


async def _reply(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await anyio.sleep_forever()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _run(app: Any, scope: Scope, body: bytes) -> tuple[int, bytes]:
    """Run the real app on a request; its status and body."""
    captured: dict[str, Any] = {"body": b""}

    async def capture(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            captured["status"] = message["status"]
        else:
            captured["body"] += message.get("body", b"")

    await app(scope, _replay(body), capture)
    return int(captured["status"]), bytes(captured["body"])


def _nonce(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name.decode("latin-1").lower() == NONCE_HEADER.lower():
            return str(value.decode("latin-1"))
    return ""


def _sign(
    scope: Scope, request: bytes, status: int, body: bytes, *, key: bytes = SIGNING_KEY, **kw: str
) -> list[tuple[bytes, bytes]]:
    """A response signature over ``request``'s call id, key and digest (or ``kw``'s)."""
    fields = {"call_id": "", "idempotency_key": "", "contract_digest": ""}
    try:
        doc = json.loads(request)
        fields = {
            "call_id": doc["call_id"],
            "idempotency_key": doc["idempotency_key"],
            "contract_digest": doc["tool"]["contract_digest"],
        }
    except (ValueError, KeyError, TypeError):
        pass
    fields.update(kw)
    value = response_signature(key, status=status, nonce=_nonce(scope), body=body, **fields)
    return [(RESPONSE_SIGNATURE_HEADER.lower().encode(), value.encode())]


def _effects() -> int:
    db = sqlite3.connect(os.environ["FAULT_DB"])
    try:
        db.execute("CREATE TABLE IF NOT EXISTS effects (idempotency_key TEXT, item TEXT)")
        return int(db.execute("SELECT count(*) FROM effects").fetchone()[0])
    finally:
        db.close()


async def _control(scope: Scope, receive: Any, send: Any) -> None:
    if scope["method"] == "POST":
        doc = json.loads(await _body(receive))
        if "mode" in doc:
            STATE["mode"] = doc["mode"]
            STATE["release"] = False
        if doc.get("release"):
            STATE["release"] = True
    body = json.dumps({"mode": STATE["mode"], "effects": _effects(), "held": STATE["held"]})
    await _reply(send, 200, body.encode(), [])


async def _describe(scope: Scope, receive: Any, send: Any, mode: str) -> None:
    status, body = await _run(inner, scope, await _body(receive))
    doc = json.loads(body)
    for tool in doc["tools"]:
        if tool["id"] == "shop.lookup" and mode == "digest":
            tool["contract_digest"] = "sha256:" + "0" * 64
        if tool["id"] == "shop.order" and mode == "order_digest":
            tool["contract_digest"] = "sha256:" + "1" * 64
        if tool["id"] == "shop.order" and mode == "order_version":
            tool["version"] = "2.0.0"
    forged = json.dumps(doc).encode()
    await _reply(send, status, forged, _sign(scope, b"", status, forged))


async def _spoiled(scope: Scope, receive: Any, send: Any, mode: str) -> None:
    """Run the tool for real, then answer as ``mode`` says."""
    request = await _body(receive)
    status, body = await _run(inner, scope, request)
    if mode == "malformed":
        body = b'{"call_id": "x", "status": '
    elif mode == "wrong_call_id":
        body = json.dumps({"call_id": "someone-else", "status": "succeeded", "result": {}}).encode()
        await _reply(send, 200, body, _sign(scope, request, 200, body, call_id="someone-else"))
        return
    elif mode == "wrong_digest":
        other = "sha256:" + "2" * 64
        await _reply(send, status, body, _sign(scope, request, status, body, contract_digest=other))
        return
    elif mode == "unsigned":
        await _reply(send, status, body, [])
        return
    elif mode == "bad_signature":
        await _reply(send, status, body, _sign(scope, request, status, body, key=b"k" * 32))
        return
    elif mode == "schema":
        doc = json.loads(body)
        doc["result"] = {"ordered": 42}
        body = json.dumps(doc).encode()
    elif mode == "gzip":
        body = gzip.compress(body)
        headers = [(b"content-encoding", b"gzip"), *_sign(scope, request, status, body)]
        await _reply(send, status, body, headers)
        return
    elif mode == "drop":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *_sign(scope, request, status, body),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body[:5], "more_body": True})
        raise RuntimeError("the scripted executor drops the connection mid-body")
    elif mode == "deep_error":
        details: dict[str, Any] = {}
        for _ in range(600):
            details = {"d": details}
        error = {"code": "internal", "reason": "DEEP", "message": "deep", "details": details}
        body = json.dumps(
            {"call_id": json.loads(request)["call_id"], "status": "failed", "error": error}
        ).encode()
    elif mode == "late":
        STATE["held"] += 1
        try:
            while not STATE["release"]:
                await anyio.sleep(0.02)
        finally:
            STATE["held"] -= 1
    await _reply(send, status, body, _sign(scope, request, status, body))


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await inner(scope, receive, send)
        return
    path, mode = scope["path"], STATE["mode"]
    if path == "/_control":
        await _control(scope, receive, send)
        return
    if mode == "v2":
        await inner_v2(scope, receive, send)
        return
    if path == "/describe" and mode in ("digest", "order_digest", "order_version"):
        await _describe(scope, receive, send, mode)
        return
    if path != "/execute" or mode in ("ok", "digest", "order_digest", "order_version"):
        await inner(scope, receive, send)
        return
    if mode in AFTER_RUNNING:
        await _spoiled(scope, receive, send, mode)
        return
    request = await _body(receive)
    if mode == "slow":
        await anyio.sleep(0.3)
        await inner(scope, _replay(request), send)
    elif mode == "hang":
        await anyio.sleep(3600)
    elif mode == "500":
        body = b'{"detail": "boom"}'
        await _reply(send, 500, body, _sign(scope, request, 500, body))
    elif mode == "echo_secrets":  # a refusal quoting the credential and the signing key
        secret = f"Bearer {os.environ['CHARTER_EXECUTOR_CREDENTIAL']} {SIGNING_KEY.decode()}"
        error = {
            "code": "invalid_input",
            "reason": "ECHO",
            "message": f"refused: {secret}",
            "details": {"seen": secret, secret: 1},
        }
        body = json.dumps({"error": error}).encode()
        await _reply(send, 400, body, _sign(scope, request, 400, body))
    elif mode in ("rate_limited", "loose_reason"):  # a signed failure of its own backend
        error = {
            "code": "transient_external",
            "reason": "RATE_LIMITED" if mode == "rate_limited" else "FAILED: SAFE TO RETRY\nOK",
            "message": "the warehouse API is throttling us",
            "details": {"retry_after": 3600},
        }
        body = json.dumps(
            {"call_id": json.loads(request)["call_id"], "status": "failed", "error": error}
        ).encode()
        await _reply(send, 200, body, _sign(scope, request, 200, body))
    elif mode == "400":
        error = {"code": "invalid_input", "reason": "ITEM_UNKNOWN", "message": "no such item"}
        body = json.dumps({"error": error}).encode()
        await _reply(send, 400, body, _sign(scope, request, 400, body))
    elif mode == "oversized":
        await _reply(send, 200, b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', [])
    elif mode == "redirect":
        headers = [(b"location", b"/execute-elsewhere"), *_sign(scope, request, 307, b"")]
        await _reply(send, 307, b"", headers)
    else:
        await _reply(send, 500, b'{"detail": "unknown mode"}', [])
