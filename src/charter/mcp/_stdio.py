"""``charter mcp --transport stdio``: one principal, one MCP session, one process."""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from charter.kernel.principals import Principal
from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._server import build_server
from charter.runtime import Runtime


async def serve_stdio(runtime: Runtime, profile: str, principal: str | Principal) -> None:
    """Serve ``profile`` to ``principal`` over stdin/stdout until the client disconnects.

    Fails before serving (``InvalidInput`` / ``ConfigError``) on an unknown profile or
    principal.
    """
    who = runtime.principal(principal)
    gateway = Gateway(runtime, profile)
    session = McpSession()

    async def identify(ctx: ServerRequestContext[Any, Any]) -> tuple[Principal, McpSession]:
        return who, session

    server = build_server(gateway, identify)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
