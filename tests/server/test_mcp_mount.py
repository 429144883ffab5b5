"""``charter serve`` answers MCP at /mcp/{profile}, authenticated like the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

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
