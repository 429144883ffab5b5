"""The SDK's low-level MCP server over a :class:`~charter.mcp._gateway.Gateway`.

The low-level server lets Charter's Build supply the tool list: ``tools/list`` answers with
exactly the tools of the session's context (the profile's tools this principal may see), and
``tools/call`` goes through the kernel; ``resources/…`` serve the manifests and artifacts of
the runs of the caller's tenant in this profile (:mod:`charter.mcp._resources`). How the
principal and the session are found depends on the transport: fixed for stdio (``--as``),
per request from the bearer credential for HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from charter._version import __version__
from charter.kernel.principals import Principal
from charter.mcp._cut import Cut
from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._resources import TEMPLATES, Resources

Identify = Callable[[ServerRequestContext[Any, Any]], Awaitable[tuple[Principal, McpSession]]]
"""Finds who is calling, and in which session, for one request."""
RawArguments = Callable[[ServerRequestContext[Any, Any]], str | None]
"""The arguments as written of a ``tools/call`` the transport's guard kept for the kernel to
refuse (a repeated key, a lone surrogate: charter.mcp._wire), else None."""
CutOf = Callable[[ServerRequestContext[Any, Any]], Cut | None]
"""The request's :class:`~charter.mcp._cut.Cut`, when a stopping server may cut its calls off
(HTTP), else None."""

INSTRUCTIONS = (
    "Tools governed by Charter. Every call is checked against its contract, authorized and "
    "recorded. Write tools may answer that a human approval is pending: wait for an operator "
    "to approve, then retry the identical call with the same idempotency_key argument."
)


def build_server(
    gateway: Gateway,
    identify: Identify,
    raw_arguments: RawArguments | None = None,
    cut_of: CutOf | None = None,
) -> Server[Any]:
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
        raw = raw_arguments(ctx) if raw_arguments is not None else None
        cut = cut_of(ctx) if cut_of is not None else None
        return await gateway.call_tool(
            principal,
            session,
            params.name,
            params.arguments,
            ctx.request_id,
            meta,
            raw=raw,
            cut=cut,
        )

    resources = Resources(gateway.runtime, gateway.profile)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        principal, session = await identify(ctx)
        cursor = params.cursor if params is not None else None
        return await resources.list(principal, session.run_id, cursor)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await identify(ctx)
        return types.ListResourceTemplatesResult(resource_templates=list(TEMPLATES))

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        principal, session = await identify(ctx)
        return await resources.read(principal, session.run_id, params.uri)

    return Server(
        f"charter-{gateway.profile}",
        version=__version__,
        title=f"Charter profile {gateway.profile}",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
