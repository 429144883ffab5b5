"""The socket ``charter serve`` and ``charter mcp --transport http`` listen on: its connections
have Nagle's algorithm off.

Before: the listening socket was made with protocol 0, and asyncio (which uvicorn serves
through) turns on ``TCP_NODELAY`` only for sockets that say TCP. Every response written in
more than one piece then waited for the client's delayed ACK: a keep-alive client (httpx, the
TypeScript client, any connection pool) saw ~45 ms per governed call instead of ~4 ms.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from charter.cli._listen import listen

pytestmark = pytest.mark.anyio


async def test_accepted_connections_have_nagle_off() -> None:
    listening = listen("127.0.0.1", 0, command="serve")
    port = listening.getsockname()[1]
    seen: list[int] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = writer.get_extra_info("socket")
        seen.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(accepted, sock=listening)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.read() == b"ok"
        writer.close()
    assert listening.proto == socket.IPPROTO_TCP
    assert seen == [1]


async def test_a_socket_made_without_the_protocol_would_keep_nagle_on() -> None:
    """The control: what the test above guards against really happens here."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    port = listening.getsockname()[1]
    seen: list[int] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(
            writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        )
        writer.close()

    server = await asyncio.start_server(accepted, sock=listening)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.read()
        writer.close()
    assert seen == [0]
