"""``charter mcp --transport stdio``: one principal, one MCP session, one process."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.context import ServerRequestContext
from mcp.shared.message import SessionMessage

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

    # Charter's own stdio transport in place of the SDK's stdio_server: the guard reads and
    # validates each line once (charter.mcp._wire: it answers the lines the SDK would drop)
    # and the server reads its messages straight from it; a reply to a pipe or socket is
    # written at once while it has room (the SDK validates every line twice and hands every
    # line to a worker thread, every reply twice).
    with _claimed_stdin() as wire_in, _claimed_stdout() as wire_out:
        guard = WireGuard(wire_in)
        server = build_server(gateway, identify, lambda ctx: guard.raw_arguments(ctx.request_id))
        write, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_write_out, outgoing, wire_out, guard.written)
            guard.attach(write)
            # the server closes ``write`` when it ends: the writer sends what is left, then ends
            await server.run(guard, write, server.create_initialization_options())


async def _write_out(
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    wire: BinaryIO | int,
    written: Callable[[SessionMessage], None],
) -> None:
    """Each message the server sends, as one line on the client's stdout (``written`` is
    told first: a response frees its request's id, :class:`~charter.mcp._wire.WireGuard`)."""
    try:
        async with outgoing:
            async for message in outgoing:
                written(message)  # before it can reach the client, who may reuse the id then
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                data = line.encode() + b"\n"
                if isinstance(wire, int):
                    await _send(wire, data)
                else:
                    await anyio.to_thread.run_sync(_write_line, wire, data)
    except anyio.ClosedResourceError:  # pragma: no cover - closed under the writer at exit
        await anyio.lowlevel.checkpoint()


async def _send(fd: int, data: bytes) -> None:
    """All of ``data`` on a non-blocking pipe or socket: at once while it has room, the rest
    as the client reads (a client that does not read holds up only this writer)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await anyio.wait_writable(fd)


def _write_line(wire: BinaryIO, data: bytes) -> None:
    wire.write(data)
    wire.flush()


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[BinaryIO | int]:
    """The client's stdin, read from a private descriptor while fd 0 reads the null device (a
    tool's child process never reads the wire); restored on exit. The descriptor itself when
    it is a pipe or a socket (the event loop can wait for it), else a file to read from."""
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
        if _pollable(wire):
            yield wire
        else:
            with os.fdopen(wire, "rb", buffering=1 << 16, closefd=False) as stream:
                yield stream
    finally:
        os.dup2(wire, 0)
        os.close(wire)


@contextlib.contextmanager
def _claimed_stdout() -> Iterator[BinaryIO | int]:
    """The client's stdout, written through a private descriptor while fd 1 points at stderr
    (a tool's or a library's stray output never reaches the wire); restored on exit. The
    descriptor itself, non-blocking while serving, when it is a pipe or a socket (the event
    loop can wait for it), else a file to write to."""
    try:
        if sys.stdout is None or sys.stdout.buffer.fileno() != 1:
            raise OSError("stdout is not fd 1")
        wire = os.dup(1)
    except (OSError, AttributeError, ValueError):
        yield sys.stdout.buffer  # not a real descriptor (an embedding host): written in place
        return
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr: stray output goes nowhere
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
        finally:
            os.close(null)
    blocking = os.get_blocking(wire)
    try:
        if _pollable(wire):
            os.set_blocking(wire, False)
            yield wire
        else:
            with os.fdopen(wire, "wb", closefd=False) as stream:
                yield stream
    finally:
        os.set_blocking(wire, blocking)
        os.dup2(wire, 1)
        os.close(wire)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait for ``fd`` (a pipe or a socket; not a regular file)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
