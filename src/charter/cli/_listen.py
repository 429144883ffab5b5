"""The listening socket of a command that serves HTTP (``charter serve``, ``charter mcp
--transport http``), bound before anything else starts.

A busy port, or an address that is not this machine's, fails at once with one line and exit
1 — before the runtime opens, before anything says where it is served, and without uvicorn's
own error (which exits 3 after start-up). The server then serves on this socket.
"""

from __future__ import annotations

import errno
import socket

from charter.cli._output import fail

GRACE_S = 5
"""How long a stopping server (SIGTERM, Ctrl-C) lets the requests in flight finish before it
cuts them off — uvicorn's ``timeout_graceful_shutdown`` for ``charter serve`` and ``charter mcp
--transport http`` alike. A governed call cut off then answers what the kernel recorded for it
(``unknown`` / ``CALL_CANCELLED`` for a tool still running), over ``/v1`` and MCP alike."""


def listen(host: str, port: int, *, command: str) -> socket.socket:
    """A listening socket on ``host:port``, or a clear error (exit 1) when it cannot be had;
    ``command`` (``serve``, ``mcp``) names what may hold the port already."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        fail(f"cannot listen on {host}:{port}: {host!r} is not an address of this machine")
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # connections whose socket says TCP, and with it on, a keep-alive client waited ~40 ms
    # (its delayed ACK) for the second write of every response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"port {port} on {host} is already in use (another charter {command}?); "
                "stop it or choose another port with --port"
            )
        fail(f"cannot listen on {host}:{port}: {exc.strerror}")
    sock.set_inheritable(True)
    return sock


def base_url(host: str, port: int) -> str:
    """The URL a person on this machine reaches ``host:port`` at."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"
