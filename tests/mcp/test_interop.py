"""Interoperability: FastMCP's client (a second MCP client library) lists and calls tools of
``charter mcp`` over stdio and over streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError

from tests.mcp import _flow
from tests.mcp._project import count, make_project
from tests.mcp.test_http import charter_http, free_port, wait_listening

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def _exercise(client: FastMCPClient, project: Path) -> None:  # type: ignore[type-arg]
    tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) == {"svc_echo", "svc_store", "svc_audit"}
    assert tools["svc_echo"].annotations is not None
    assert tools["svc_echo"].annotations.read_only_hint is True
    result = await client.call_tool("svc_echo", {"text": "interop"})
    assert result.structured_content == {"echo": "interop", "n": count(project, "echo")}
    with pytest.raises(ToolError, match="invalid_input ARGS_"):
        await client.call_tool("svc_echo", {"text": 1})
    pending = await client.call_tool(
        "svc_store", {"text": "t", "idempotency_key": "interop"}, raise_on_error=False
    )
    assert pending.is_error
    assert pending.structured_content is not None
    assert pending.structured_content["status"] == "pending_approval"


async def test_fastmcp_client_over_stdio(tmp_path: Path) -> None:
    make_project(tmp_path)
    transport = StdioTransport(
        command=_flow.CHARTER,
        args=["mcp", "--profile", "main", "--as", "app", "--project", str(tmp_path)],
        cwd=str(tmp_path),
    )
    async with FastMCPClient(transport) as client:
        await _exercise(client, tmp_path)


async def test_fastmcp_client_over_http(tmp_path: Path) -> None:
    keys = make_project(tmp_path)
    with charter_http(tmp_path, free_port()) as base:
        await wait_listening(base)
        transport = StreamableHttpTransport(base + "/mcp/main", auth=keys["app"])
        async with FastMCPClient(transport) as client:
            await _exercise(client, tmp_path)
