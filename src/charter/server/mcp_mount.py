"""``/mcp/{profile}``: Charter's MCP endpoints (streamable HTTP, stateless) inside the API.

The endpoints exist once the runtime is open (``charter serve`` opens it in the lifespan), so
the mount is a small ASGI app that delegates to them and answers 503 ``MCP_UNAVAILABLE``
before start-up. The bearer credential — API key or JWT, exactly as for ``/v1``, refused with
the same ``401`` reasons — decides the principal; MCP session ids are never used as
authentication.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from starlette.types import Receive, Scope, Send

from charter.errors import ErrorCode
from charter.kernel.principals import Principal
from charter.server.problems import problem_response
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
            # a PermissionDenied (AUTH_INVALID, AUTH_TOKEN_EXPIRED…) is the 401's reason
            return state.authenticator.principal(f"Bearer {token}")

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
            response = problem_response(
                code=ErrorCode.INTERNAL,
                reason="MCP_UNAVAILABLE",
                detail="MCP is not running (the server is starting, or the mcp extra is missing)",
                status=503,
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
