"""``charter mcp --transport http``: stateless streamable HTTP on loopback, bearer-authenticated,
driven by the official MCP SDK client; and :func:`charter.mcp.mount_mcp` in a FastAPI app."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
import uvicorn
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from charter.mcp import mount_mcp
from charter.runtime import open_runtime
from tests.mcp import _flow
from tests.mcp._project import make_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_listening(base: str) -> None:
    async with httpx2.AsyncClient(trust_env=False) as http:
        with anyio.fail_after(60):
            while True:
                try:
                    await http.get(base + "/mcp/main")
                    return
                except httpx2.TransportError:
                    await anyio.sleep(0.1)


@contextmanager
def charter_http(project: Path, port: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [
            _flow.CHARTER,
            "mcp",
            "--profile",
            "main",
            "--transport",
            "http",
            "--port",
            str(port),
            "--project",
            str(project),
        ],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


@asynccontextmanager
async def client(url: str, key: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, trust_env=False) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as mcp_client,
    ):
        yield mcp_client


def check_problem(answer: httpx2.Response, status: int, code: str, reason: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["type"] == f"urn:charter:problem:{reason}"
    assert (problem["status"], problem["code"], problem["reason"]) == (status, code, reason)
    assert problem["retryable"] is False
    assert problem["detail"]


async def check_transport_refusals(http: httpx2.AsyncClient, url: str, key: str) -> None:
    """What the SDK's transport refuses before reading a message is refused as a problem
    document with its reason, not an SDK text or a JSON-RPC error without one — and a GET,
    which the SDK held open with nothing to send on a stateless endpoint, is answered at once."""
    auth = {"Authorization": f"Bearer {key}"}
    message = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    json_in = {**auth, "Content-Type": "application/json"}
    with anyio.fail_after(10):
        for method in ("GET", "DELETE", "PUT"):
            answer = await http.request(method, url, headers={**auth, "Accept": "*/*"})
            check_problem(answer, 405, "invalid_input", "METHOD_NOT_ALLOWED")
            assert answer.headers["allow"] == "POST"
        for media in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {**auth, "Accept": "application/json"}
            if media is not None:
                headers["Content-Type"] = media
            answer = await http.post(url, content=message, headers=headers)
            check_problem(answer, 415, "invalid_input", "UNSUPPORTED_MEDIA_TYPE")
            assert "application/json" in answer.json()["detail"]
        for accept in ("text/html", "text/event-stream", ""):
            answer = await http.post(url, content=message, headers={**json_in, "Accept": accept})
            check_problem(answer, 406, "invalid_input", "NOT_ACCEPTABLE")
        # what the SDK serves is still served: JSON with a charset, any wildcard Accept — and
        # media types in any case (RFC 9110: they are case-insensitive)
        for media, accept in (
            ("application/json; charset=utf-8", "application/json"),
            ("Application/JSON; charset=UTF-8", "Application/Json"),
            ("application/json", "application/*"),
            ("application/json", "text/event-stream, */*;q=0.1"),
        ):
            answer = await http.post(
                url, content=message, headers={**auth, "Content-Type": media, "Accept": accept}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["tools"]


async def test_http_acceptance(tmp_path: Path) -> None:
    keys = make_project(tmp_path)
    with charter_http(tmp_path, free_port()) as base:
        await wait_listening(base)
        url = base + "/mcp/main"
        async with httpx2.AsyncClient(trust_env=False) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            # refusals are the HTTP API's problem documents, each with its reason
            bad = {"Authorization": "Bearer not-a-key"}
            sid = {"Mcp-Session-Id": "anything"}  # a session id is never authentication
            for headers, reason in (
                ({}, "AUTH_MISSING"),
                (bad, "AUTH_INVALID"),
                (sid, "AUTH_MISSING"),
            ):
                refused = await http.post(url, json=body, headers=headers)
                assert refused.status_code == 401
                check_problem(refused, 401, "permission_denied", reason)
            missing = await http.post(base + "/mcp/nope", json=body)
            check_problem(missing, 404, "invalid_input", "PROFILE_UNKNOWN")
            await check_transport_refusals(http, url, keys["app"])
        async with client(url, keys["app"]) as main, client(url, keys["viewer"]) as viewer:
            await _flow.check_listing(main, viewer)
            await _flow.check_read_and_ledger(main, tmp_path)
            await _flow.check_invalid(main)
            await _flow.check_approval_and_retry(main, tmp_path, "store-http")
            await _flow.check_read_key_dedup(main, tmp_path, "echo-http")
        # a new connection of the same principal: its request ids repeat, yet an unkeyed call
        # is a new call (not another connection's receipt)
        async with client(url, keys["app"]) as other:
            fresh = await other.call_tool("svc_echo", {"text": "hi"})
            assert not fresh.is_error
            assert (fresh.structured_content or {})["n"] > 1
        # a new connection of the same principal: the identical keyed retry is still a receipt
        async with client(url, keys["app"]) as again:
            args = {"text": "keep me", "idempotency_key": "store-http"}
            result = await again.call_tool("svc_store", args)
            assert not result.is_error
            assert result.structured_content == {
                "stored": "keep me",
                "n": 1,
            }


async def test_mount_mcp_in_fastapi(tmp_path: Path) -> None:
    """What ``charter serve`` does: mount every profile at /mcp/{profile}."""
    keys = make_project(tmp_path)
    port = free_port()
    async with open_runtime(tmp_path) as rt:
        app = FastAPI()

        @app.get("/healthz")
        async def healthz() -> dict[str, bool]:
            return {"ok": True}

        mount_mcp(app, rt)
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            base = f"http://127.0.0.1:{port}"
            await wait_listening(base)
            async with client(base + "/mcp/reader", keys["viewer"]) as reader:
                tools = (await reader.list_tools()).tools
                assert [t.name for t in tools] == ["svc_echo"]
                result = await reader.call_tool("svc_echo", {"text": "x"})
                assert result.structured_content == {"echo": "x", "n": 1}
            async with httpx2.AsyncClient(trust_env=False) as http:
                assert (await http.get(base + "/healthz")).json() == {"ok": True}
            server.should_exit = True
