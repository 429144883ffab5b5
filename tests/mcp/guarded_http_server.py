"""A downstream MCP server over streamable HTTP that checks its bearer credential and can answer
a tool call with a JSON-RPC error (uvicorn, loopback; the SDK's low-level ``Server``).

``python guarded_http_server.py PORT DIR TOKEN``: every request without ``Authorization:
Bearer TOKEN`` is refused ``401`` before the SDK reads it (each refusal counted in
``DIR/refused.count``). One tool, ``change``, counts each run in ``DIR/change.count`` — before
it answers, so a test can tell whether it ran — and answers by its ``key``:

- ``internal``: ran, then a JSON-RPC error ``-32603`` (an exception after the effect);
- ``invalid``: ran, then ``-32602`` — what the SDK sends for a pydantic ``ValidationError``
  raised anywhere in a handler, after an effect too;
- ``unsupported``: refused with ``-32601`` before running (not counted);
- ``badshape``: ran, then answered ``{"value": 5}``, which breaks its own output schema;
- anything else: ran, the key upper-cased.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

HOME = Path(sys.argv[2])
TOKEN = sys.argv[3]


def _bump(name: str) -> None:
    path = HOME / f"{name}.count"
    path.write_text(str(int(path.read_text()) + 1 if path.exists() else 1))


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="change",
                description="Change a record.",
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
            )
        ]
    )


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    key = str((params.arguments or {}).get("key", ""))
    if key == "unsupported":
        raise MCPError(code=METHOD_NOT_FOUND, message="tools/call is not supported here")
    _bump("change")
    if key == "internal":
        raise MCPError(code=INTERNAL_ERROR, message="the store went away after the write")
    if key == "invalid":
        raise MCPError(code=INVALID_PARAMS, message="Invalid request parameters")
    if key == "badshape":  # ran, then answered against its own output schema
        return types.CallToolResult(content=[], structured_content={"value": 5})
    value = {"value": key.upper()}
    return types.CallToolResult(
        content=[types.TextContent(text=value["value"])], structured_content=value
    )


server: Server[Any] = Server("guarded", on_list_tools=list_tools, on_call_tool=call_tool)
inner = server.streamable_http_app(
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
)


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Refuse (401) an HTTP request without the bearer token, before the SDK sees it."""
    if scope["type"] == "http":
        headers = dict(scope.get("headers") or [])
        if headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
            _bump("refused")
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
    await inner(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
