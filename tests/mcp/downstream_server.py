"""A downstream MCP server for the tests (run as a script over stdio).

Its tool's description is read from ``description.txt`` at every listing, so a test can change
it while Charter is running; every call is counted in ``lookup.count`` and every start of the
server in ``starts.count`` (its pid in ``server.pid``); the key ``crash`` kills it mid-call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

HERE = Path.cwd()


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="lookup",
                description=(HERE / "description.txt").read_text().strip(),
                input_schema={
                    "type": "object",
                    "properties": {"key": {"type": "string", "maxLength": 50}},
                    "required": ["key"],
                    "additionalProperties": False,
                },
                output_schema={
                    "type": "object",
                    "properties": {"value": {"type": "string"}},
                    "required": ["value"],
                },
                annotations=types.ToolAnnotations(read_only_hint=True),
            )
        ]
    )


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if (params.arguments or {}).get("key") == "crash":
        os._exit(1)  # dies with the call in hand: the caller cannot know whether it ran
    counter = HERE / "lookup.count"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    key = str((params.arguments or {}).get("key", ""))
    value = {"value": key.upper()}
    return types.CallToolResult(
        content=[types.TextContent(text=value["value"])], structured_content=value
    )


async def main() -> None:
    starts = HERE / "starts.count"
    starts.write_text(str(int(starts.read_text()) + 1 if starts.exists() else 1))
    (HERE / "server.pid").write_text(str(os.getpid()))
    server: Server[Any] = Server("downstream", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
