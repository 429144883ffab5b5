"""An MCP ``tools/call`` over streamable HTTP still running when the server is told to stop
(SIGTERM): once the 5-second grace period is over the call is cut off, and its client is told
what became of it — as ``charter serve`` tells a ``/v1`` client (tests/server/test_stopping.py).

Before: the call was cut off with no JSON-RPC answer at all (the connection closed under it),
or with a bare 500 — and ``charter mcp --transport http`` had no grace period (it waited for
the tool however long it ran). Now the answer is the call's recorded envelope as the MCP
result of an ``unknown`` call (``isError``, ``unknown`` / ``CALL_CANCELLED`` in its structured
content), and the same idempotency key keeps answering it after a restart without running the
tool again. Both eras of the protocol are cut the same way: the official SDK client's
(2026-07-28, stateless per request) and a handshake-era client's (``MCP-Protocol-Version:
2025-11-25``, plain JSON-RPC posts) — on ``charter mcp --transport http`` and on the ``/mcp``
mount of ``charter serve``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.server._harness import (
    Project,
    spawn_mcp_process,
    spawn_serve_process,
    write_served_project,
)

pytestmark = pytest.mark.slow

STORE = "sqlite:///.charter/charter.db"
Spawn = Callable[[Path, str], AbstractContextManager[tuple[str, subprocess.Popen[bytes]]]]
SURFACES: dict[str, Spawn] = {
    "charter mcp": spawn_mcp_process,
    "charter serve": spawn_serve_process,
}
HANDSHAKE_ERA = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def sdk_call(url: str, key: str, idempotency_key: str) -> dict[str, Any]:
    """``kv_slow`` called by the official SDK client (the version it negotiates: 2026-07-28);
    its result as JSON."""

    async def call() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60, trust_env=False) as http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            arguments = {"seconds": 12, "idempotency_key": idempotency_key}
            result = await client.call_tool("kv_slow", arguments)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    return anyio.run(call)


def handshake_call(url: str, key: str, idempotency_key: str) -> httpx2.Response:
    """``kv_slow`` called by a handshake-era client: one JSON-RPC request, posted."""
    arguments = {"seconds": 12, "idempotency_key": idempotency_key}
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "kv_slow", "arguments": arguments},
    }
    headers = {**HANDSHAKE_ERA, "Authorization": f"Bearer {key}"}
    return httpx2.post(url, json=body, headers=headers, timeout=60, trust_env=False)


def check_cut(result: dict[str, Any], call_id: str) -> None:
    """``result`` is the MCP result of a call recorded ``unknown`` / ``CALL_CANCELLED``."""
    assert result["isError"] is True, result
    structured = result["structuredContent"]
    assert (structured["call_id"], structured["status"]) == (call_id, "unknown"), result
    assert structured["error"]["reason"] == "CALL_CANCELLED", result
    assert result["_meta"]["charter/status"] == "unknown", result
    assert result["content"][0]["text"].startswith("internal CALL_CANCELLED: "), result


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return write_served_project(tmp_path / "served")


@pytest.mark.parametrize("surface", list(SURFACES))
def test_an_mcp_call_cut_off_by_the_servers_stop_answers_its_recorded_envelope(
    project: Project, surface: str
) -> None:
    key = project.keys["app"]
    journal = project.root / "journal.txt"
    answers: dict[str, Any] = {}

    def run(name: str, call: Callable[[], Any]) -> threading.Thread:
        def target() -> None:
            try:
                answers[name] = call()
            except BaseException as exc:  # what the client saw instead of an answer
                answers[name] = exc

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    with SURFACES[surface](project.root, STORE) as (base, proc):
        url = f"{base}/mcp/all"
        callers = [
            run("sdk", lambda: sdk_call(url, key, "cut-sdk")),
            run("handshake", lambda: handshake_call(url, key, "cut-handshake")),
        ]
        deadline = time.monotonic() + 30
        while not (journal.exists() and {"cut-sdk", "cut-handshake"} <= set(_started(journal))):
            assert time.monotonic() < deadline, f"the tools never started: {answers}"
            time.sleep(0.05)
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        for caller in callers:
            caller.join(timeout=60)
        proc.wait(timeout=60)
        stopped_s = time.monotonic() - stopping
    log = (project.root / f"serve-{base.rsplit(':', 1)[1]}.log").read_text()
    assert 4 < stopped_s < 11, (stopped_s, log)  # the grace period, then the cut: not 12 s
    assert isinstance(answers["sdk"], dict), (answers["sdk"], log)
    check_cut(answers["sdk"], "cut-sdk")
    answer = answers["handshake"]
    assert isinstance(answer, httpx2.Response), (answer, log)
    assert answer.status_code == 200, (answer.text, log)
    message = answer.json()
    assert (message["jsonrpc"], message["id"]) == ("2.0", 7), message
    check_cut(message["result"], "cut-handshake")
    assert "Exception in ASGI application" not in log
    assert "Traceback" not in log
    # the same keys after a restart: the recorded answer, and the tool is not run again
    with SURFACES[surface](project.root, STORE) as (base, _):
        url = f"{base}/mcp/all"
        check_cut(sdk_call(url, key, "cut-sdk"), "cut-sdk")
        again = handshake_call(url, key, "cut-handshake")
        assert again.status_code == 200, again.text
        check_cut(again.json()["result"], "cut-handshake")
    assert sorted(_started(journal)) == ["cut-handshake", "cut-sdk"]


def _started(journal: Path) -> Iterator[str]:
    """The call ids of the ``kv.slow`` runs the journal records."""
    for line in journal.read_text().splitlines():
        entry = json.loads(line)
        if entry["tool"] == "kv.slow":
            yield entry["call_id"]
