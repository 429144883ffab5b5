"""``charter mcp --transport stdio``: one principal, one MCP session, one process."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from charter.kernel.principals import Principal
from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._server import build_server
from charter.mcp._wire import WireGuard
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

    with _claimed_stdin() as wire:
        guard = WireGuard(wire)
        server = build_server(gateway, identify, lambda ctx: guard.raw_arguments(ctx.request_id))
        # stdout is claimed by the SDK (fd 1 points at stderr while serving); stdin is read
        # through the guard, which answers the lines the SDK would drop (charter.mcp._wire).
        async with stdio_server(stdin=guard) as (read, write):  # type: ignore[arg-type]
            guard.attach(write)
            await server.run(read, write, server.create_initialization_options())


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[BinaryIO]:
    """The client's stdin, read from a private descriptor while fd 0 reads the null device (a
    tool's child process never reads the wire); restored on exit."""
    try:
        if sys.stdin is None or sys.stdin.buffer.fileno() != 0:
            raise OSError("stdin is not fd 0")
        wire = os.dup(0)
    except (OSError, AttributeError, ValueError):
        yield sys.stdin.buffer  # not a real descriptor (an embedding host): read it in place
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        with os.fdopen(wire, "rb", buffering=1 << 16, closefd=False) as stream:
            yield stream
    finally:
        os.dup2(wire, 0)
        os.close(wire)
