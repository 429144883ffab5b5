"""Charter as an MCP server over a capability profile (``charter mcp``).

- :func:`serve_stdio` — one principal (``--as``) over stdin/stdout;
- :func:`mcp_app` — an ASGI app serving every profile at ``/{profile}`` over streamable HTTP
  (stateless, bearer-authenticated); :func:`mount_mcp` mounts it at ``/mcp/{profile}`` in
  ``charter serve``;
- :class:`Gateway` — the transport-neutral part: the tool list and the governed call.
"""

from charter.mcp._gateway import IDEMPOTENCY_KEY, MCP_SESSION_SLUG, Gateway, McpSession
from charter.mcp._http import McpApp, McpEndpoint, mcp_app, mount_mcp
from charter.mcp._server import build_server
from charter.mcp._stdio import serve_stdio

__all__ = [
    "IDEMPOTENCY_KEY",
    "MCP_SESSION_SLUG",
    "Gateway",
    "McpApp",
    "McpEndpoint",
    "McpSession",
    "build_server",
    "mcp_app",
    "mount_mcp",
    "serve_stdio",
]
