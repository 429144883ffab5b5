"""The console's run page shows a delegating call's calls indented under it (a real server
on loopback, an operator signed in)."""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from charter.client import Client
from charter.runtime import Runtime, open_runtime
from charter.server import create_app
from tests.console._console import OPEN, signed_in
from tests.delegation import holder
from tests.delegation._project import DEPLOY_YAML, write_project
from tests.server._harness import ThreadServer

STORE = "sqlite:///.charter/charter.db"


def _with_keys(project: Path) -> dict[str, str]:
    keys = {name: secrets.token_urlsafe(24) for name in ("alice", "app")}
    text = DEPLOY_YAML
    for name, key in keys.items():
        digest = hashlib.sha256(key.encode()).hexdigest()
        text = text.replace(f"  {name}:\n", f"  {name}:\n    api_key: {{sha256: {digest}}}\n")
    (project / "charter.deploy.yaml").write_text(text)
    return keys


def test_the_run_page_shows_the_delegation_tree(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    keys = _with_keys(project)

    @contextlib.asynccontextmanager
    async def opener() -> AsyncIterator[Runtime]:
        async with open_runtime(project, store=STORE) as rt:
            holder.RUNTIME[:] = [rt]
            yield rt

    try:
        with ThreadServer(create_app(opener=opener)) as server:
            with Client(server.url, keys["app"]) as app:
                ctx = app.resolve_context("all")
                env = app.call(ctx["context_id"], "team.run", "t1", {"keys": ["a", "b"]})
                assert env.status.value == "succeeded", env.error
                app.call(ctx["context_id"], "kv.get", "solo", {"key": "z"})
            page = signed_in(server.url, keys["alice"]).get(f"/console/runs/{ctx['run_id']}")
            assert page.status_code == 200
            rows = re.findall(
                r'data-call-id="([^"]+)" data-state="([^"]+)" data-depth="(\d)"'
                r'(?: data-parent-call="([^"]+)")?',
                page.text,
            )
            assert rows == [
                ("t1", "succeeded", "0", ""),
                ("t1.get0", "succeeded", "1", "t1"),
                ("t1.get1", "succeeded", "1", "t1"),
                ("t1.put", "pending_approval", "1", "t1"),
                ("solo", "succeeded", "0", ""),
            ]
            assert page.text.count('data-testid="delegates"') == 1
    finally:
        holder.RUNTIME.clear()
        for client in OPEN:
            client.close()
        OPEN.clear()
