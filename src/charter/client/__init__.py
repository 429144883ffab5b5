"""A Python client for Charter's HTTP API, raising Charter's own exception tree.

    from charter.client import Client

    with Client("http://127.0.0.1:8750", api_key=os.environ["CHARTER_API_KEY"]) as cl:
        ctx = cl.resolve_context("editor")
        env = cl.call(ctx["context_id"], "notes.add", "c1", {"title": "t", "body": "b"})

:class:`AsyncClient` has the same methods, awaited. See docs/client.md.
"""

from charter.client._async import AsyncClient
from charter.client._sync import Client

__all__ = ["AsyncClient", "Client"]
