"""A downstream MCP server over streamable HTTP for the egress and private-CA tests (uvicorn,
loopback).

``python mcp_http_server.py PORT COUNT_FILE [CERT_FILE KEY_FILE]``: one tool, ``lookup``, that
counts its calls in COUNT_FILE; with a certificate and its key, served over https.
DNS-rebinding protection is off because the client sends the executor's host name
(``Host: executor.test:PORT``) to the pinned loopback address, as a pinned binding does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

COUNT = Path(sys.argv[2])
server = MCPServer("down")


@server.tool()
def lookup(key: str) -> dict[str, str]:
    """Look a key up in the directory."""
    n = int(COUNT.read_text()) + 1 if COUNT.exists() else 1
    COUNT.write_text(str(n))
    return {"value": key.upper()}


app = server.streamable_http_app(
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
)

if __name__ == "__main__":
    tls = {"ssl_certfile": sys.argv[3], "ssl_keyfile": sys.argv[4]} if len(sys.argv) > 4 else {}
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", **tls)
