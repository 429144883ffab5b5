"""``charter mcp --transport stdio``: one principal, one MCP session, one process."""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from charter.kernel.principals import Principal
from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._server import build_server
from charter.runtime import Runtime


async def serve_stdio(
    runtime: Runtime,
    profile: str,
    principal: str | Principal,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    agent: str | None = None,
) -> None:
    """Serve ``profile`` to ``principal`` over stdin/stdout until the client disconnects;
    bound to a catalog run (and task) when ``run_id`` (and ``task_id``) are given.

    Fails before serving (``InvalidInput`` / ``ConfigError`` / ``PermissionDenied``) on an
    unknown profile or principal, or a run or task the principal cannot see.
    """
    who = runtime.principal(principal)
    if run_id is not None and task_id is not None:
        pinned = (await runtime.workflows.task(run_id, task_id, as_=who))["contract"]
        if agent is None and pinned["role"] in runtime.build.agents:
            agent = pinned["role"]
    elif run_id is not None:
        await runtime.workflows.tasks(run_id, as_=who)  # the run exists for this tenant
    gateway = Gateway(runtime, profile, run_id=run_id, task_id=task_id, agent=agent)
    session = McpSession()

    async def identify(ctx: ServerRequestContext[Any, Any]) -> tuple[Principal, McpSession]:
        return who, session

    server = build_server(gateway, identify)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
