"""An executor whose behaviour a test switches: ``POST /_control {"mode": ...}``.

The real ``charter.remote.app`` serves the tools; in a fault mode this wrapper answers
``/execute`` (or ``/describe``) itself: ``slow`` (0.3 s, then normal), ``hang``, ``500``,
``400``, ``malformed``, ``wrong_call_id``, ``oversized``, ``redirect``, ``digest`` (describe
reports another contract digest for ``shop.lookup``). ``GET /_control`` reports the mode and
the business effects counted by ``shop.order``. Test-only: the control endpoint has no auth.
Serve with ``uvicorn tests.executors_http.fault_app:app``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

import anyio

import charter.remote
from tests.executors_http import fault_tools

inner = charter.remote.app(
    [fault_tools.lookup, fault_tools.order],
    name="fault-executor",
    version="0.0.1",
    journal=os.environ["FAULT_JOURNAL"],
)
STATE: dict[str, Any] = {"mode": "ok"}

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


def _effects() -> int:
    db = sqlite3.connect(os.environ["FAULT_DB"])
    try:
        db.execute("CREATE TABLE IF NOT EXISTS effects (idempotency_key TEXT, item TEXT)")
        return int(db.execute("SELECT count(*) FROM effects").fetchone()[0])
    finally:
        db.close()


async def _control(scope: Scope, receive: Any, send: Any) -> None:
    if scope["method"] == "POST":
        STATE["mode"] = json.loads(await _body(receive))["mode"]
    body = json.dumps({"mode": STATE["mode"], "effects": _effects()}).encode()
    await _reply(send, 200, body, [])


async def _describe_other_digest(scope: Scope, receive: Any, send: Any) -> None:
    captured: dict[str, Any] = {}

    async def capture(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            captured["status"] = message["status"]
        else:
            captured["body"] = captured.get("body", b"") + message.get("body", b"")

    await inner(scope, receive, capture)
    doc = json.loads(captured["body"])
    for tool in doc["tools"]:
        if tool["id"] == "shop.lookup":
            tool["contract_digest"] = "sha256:" + "0" * 64
    await _reply(send, captured["status"], json.dumps(doc).encode(), [])


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await inner(scope, receive, send)
        return
    path, mode = scope["path"], STATE["mode"]
    if path == "/_control":
        await _control(scope, receive, send)
        return
    if path == "/describe" and mode == "digest":
        await _describe_other_digest(scope, receive, send)
        return
    if path != "/execute" or mode in ("ok", "digest"):
        await inner(scope, receive, send)
        return
    if mode == "slow":
        await anyio.sleep(0.3)
        await inner(scope, receive, send)
    elif mode == "hang":
        await anyio.sleep(3600)
    elif mode == "500":
        await _reply(send, 500, b'{"detail": "boom"}', [])
    elif mode == "400":
        error = {"code": "invalid_input", "reason": "ITEM_UNKNOWN", "message": "no such item"}
        await _reply(send, 400, json.dumps({"error": error}).encode(), [])
    elif mode == "malformed":
        await _reply(send, 200, b'{"call_id": "x", "status": ', [])
    elif mode == "wrong_call_id":
        body = {"call_id": "someone-else", "status": "succeeded", "result": {}}
        await _reply(send, 200, json.dumps(body).encode(), [])
    elif mode == "oversized":
        await _reply(send, 200, b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', [])
    elif mode == "redirect":
        await _reply(send, 307, b"", [(b"location", b"/execute-elsewhere")])
    else:
        await _reply(send, 500, b'{"detail": "unknown mode"}', [])
