"""``/mcp/{profile}``: Charter's MCP endpoints (streamable HTTP, stateless) inside the API.

The endpoints exist once the runtime is open (``charter serve`` opens it in the lifespan), so
the mount is a small ASGI app that delegates to them and answers 503 before start-up. The
bearer credential — API key or JWT, exactly as for ``/v1`` — decides the principal; MCP
session ids are never used as authentication.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from starlette.types import Receive, Scope, Send

from charter.errors import CharterError
from charter.kernel.principals import Principal
from charter.server.state import ServerState


class McpMount:
    def __init__(self) -> None:
        self.app: Any = None

    def starting(self, state: ServerState) -> AbstractAsyncContextManager[Any]:
        """Create the endpoints for ``state``'s runtime and run their session managers."""
        try:
            from charter.mcp import mcp_app
        except ImportError:  # the mcp extra is not installed: the API works without it
            return nullcontext()

        def authenticate(token: str) -> Principal | None:
            try:
                return state.authenticator.principal(f"Bearer {token}")
            except CharterError:
                return None

        app = mcp_app(state.runtime, authenticate)

        @asynccontextmanager
        async def run() -> AsyncIterator[None]:
            async with app.running():
                self.app = app
                try:
                    yield
                finally:
                    self.app = None

        return run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if self.app is None:
            body = json.dumps({"error": "unavailable", "detail": "MCP is not running"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
