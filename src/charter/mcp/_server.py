"""The SDK's low-level MCP server over a :class:`~charter.mcp._gateway.Gateway`.

The low-level server lets Charter's Build supply the tool list: ``tools/list`` answers with
exactly the tools of the session's context (the profile's tools this principal may see), and
``tools/call`` goes through the kernel. How the principal and the session are found depends on
the transport: fixed for stdio (``--as``), per request from the bearer credential for HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from charter._version import __version__
from charter.kernel.principals import Principal
from charter.mcp._gateway import Gateway, McpSession

Identify = Callable[[ServerRequestContext[Any, Any]], Awaitable[tuple[Principal, McpSession]]]
"""Finds who is calling, and in which session, for one request."""

INSTRUCTIONS = (
    "Tools governed by Charter. Every call is checked against its contract, authorized and "
    "recorded. Write tools may answer that a human approval is pending: wait for an operator "
    "to approve, then retry the identical call with the same idempotency_key argument."
)


def build_server(gateway: Gateway, identify: Identify) -> Server[Any]:
    """A low-level ``Server`` whose tools come from ``gateway`` for the caller ``identify``
    finds."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal, session = await identify(ctx)
        return types.ListToolsResult(tools=await gateway.list_tools(principal, session))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        principal, session = await identify(ctx)
        meta = params.meta if isinstance(params.meta, dict) else None
        return await gateway.call_tool(
            principal, session, params.name, params.arguments, ctx.request_id, meta
        )

    return Server(
        f"charter-{gateway.profile}",
        version=__version__,
        title=f"Charter profile {gateway.profile}",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
