"""``charter serve`` answers MCP at /mcp/{profile}, authenticated like the API and refusing
like it: a missing or bad credential, an unknown profile are the API's problem documents."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.mcp.test_http import check_transport_refusals
from tests.server._harness import Project, ThreadServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def mcp_client(url: str, key: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, trust_env=False) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


async def test_mcp_is_mounted_in_the_api_server(project: Project, server: ThreadServer) -> None:
    url = server.url + "/mcp/all"
    async with mcp_client(url, project.keys["app"]) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"kv_get", "kv_put"} <= tools
        result = await client.call_tool("kv_get", {"key": "k", "idempotency_key": "m1"})
        assert not result.is_error, result
    async with httpx2.AsyncClient(trust_env=False) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream"}
        assert (await http.post(url, json=body, headers=headers)).status_code == 401
        missing = await http.post(server.url + "/mcp/nope", json=body, headers=headers)
        assert missing.status_code == 404
        # what the transport cannot serve: 405/415/406 problem documents, as standalone
        await check_transport_refusals(http, url, project.keys["app"])


async def test_run_resources_over_the_mounted_mcp_follow_the_tenant(
    project: Project, server: ThreadServer
) -> None:
    """An artifact uploaded through the API is an MCP resource of its tenant's profile server
    — and nothing at all for another tenant's credential."""
    from charter.client import AsyncClient

    async with AsyncClient(server.url, project.keys["app"]) as api:
        ctx = await api.resolve_context("all")
        record = await api.upload_artifact(
            ctx["run_id"], b"over http\n", name="notes/mounted.txt", media_type="text/plain"
        )
    uri = f"charter://runs/{ctx['run_id']}/artifacts/{record['artifact_id']}"
    url = server.url + "/mcp/all"
    async with mcp_client(url, project.keys["app"]) as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uri in listed
        assert f"charter://runs/{ctx['run_id']}/manifest.json" in listed
        content = (await client.read_resource(uri)).contents[0]
        assert getattr(content, "text", None) == "over http\n"
    async with mcp_client(url, project.keys["gapp"]) as other:
        listed = {str(r.uri) for r in (await other.list_resources()).resources}
        assert not any(ctx["run_id"] in u for u in listed)
        with pytest.raises(MCPError, match="no such resource"):
            await other.read_resource(uri)


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "AUTH_MISSING"),
        ("Bearer wrong-key", "AUTH_INVALID"),
        ("Basic abc", "AUTH_INVALID"),
        ("expired", "AUTH_TOKEN_EXPIRED"),
        ("subject", "AUTH_UNKNOWN_SUBJECT"),
    ],
)
async def test_mcp_refuses_a_credential_as_the_api_does(
    project: Project, server: ThreadServer, header: str | None, reason: str
) -> None:
    """The mount's 401 is the API's problem document, with the API's reason (it was
    ``{"error": "unauthenticated"}``, no reason, for every one of these)."""
    from tests.server.test_api import _token

    tokens = {
        "expired": _token(project, exp=int(time.time()) - 10),
        "subject": _token(project, sub="mallory"),
    }
    if header in tokens:
        header = f"Bearer {tokens[header]}"
    sent = {**MCP_HEADERS, **({"Authorization": header} if header else {})}
    async with httpx2.AsyncClient(base_url=server.url, trust_env=False, timeout=30) as http:
        mcp = await http.post("/mcp/all", json=LIST, headers=sent)
        api = await http.get("/v1/runs", headers=sent)
    for answer in (mcp, api):
        assert answer.status_code == 401
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.headers["www-authenticate"] == 'Bearer realm="charter"'
    problem = mcp.json()
    assert problem == {**api.json(), "detail": problem["detail"]}  # same document
    assert problem["reason"] == reason
    assert problem["code"] == "permission_denied"
    assert problem["type"] == f"urn:charter:problem:{reason}"


@pytest.mark.parametrize(
    ("path", "reason"),
    [("/mcp/nope", "PROFILE_UNKNOWN"), ("/mcp/all/extra", "ROUTE_NOT_FOUND")],
)
async def test_mcp_answers_an_unknown_path_with_a_problem(
    project: Project, server: ThreadServer, path: str, reason: str
) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {project.keys['app']}"}
    async with httpx2.AsyncClient(base_url=server.url, trust_env=False, timeout=30) as http:
        answer = await http.post(path, json=LIST, headers=headers)
        api = await http.get("/v1/nope", headers=headers)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem.keys() == api.json().keys()
    assert problem["reason"] == reason
    assert problem["status"] == 404
    assert problem["title"] == "Not Found"
    assert problem["code"] == "invalid_input"
    assert "nope" not in problem["detail"]  # the path is the caller's
