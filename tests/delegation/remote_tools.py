"""Tools of the remote delegation test: ``team.remote`` is served by a ``charter.remote``
executor process and calls back into Charter through ``charter.client``; ``kv.get`` runs in
Charter's own process. This file is also the project's ``tools.py`` (same contracts)."""

from __future__ import annotations

import os
from typing import Any

import charter
from charter.client import AsyncClient


@charter.tool("kv.get", permissions=["kv:read"])
def get(key: str) -> dict[str, Any]:
    """Read a key."""
    return {"key": key, "value": None}


@charter.tool("team.remote", delegates_execution=True, permissions=["kv:read"], timeout_s=60)
async def team_remote(keys: list[str], ctx: charter.Context) -> dict[str, Any]:
    """A remote team: read each key through Charter (each call governed, a child of this)."""
    server, key = os.environ["DELEG_SERVER"], os.environ["DELEG_API_KEY"]
    statuses = []
    async with AsyncClient(server, key) as client:
        for i, name in enumerate(keys):
            env = await client.call(ctx.context_id, "kv.get", f"{ctx.call_id}.{i}", {"key": name})
            statuses.append(env.status.value)
    return {"statuses": statuses, "span": ctx.span_id}
