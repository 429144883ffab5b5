"""The served test project plus tools that write and read artifacts through ``ctx.artifacts``."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import Project, ThreadServer, write_served_project

FILES = '''
"""Tools that write and read run artifacts."""
from __future__ import annotations

from typing import Any

import charter


@charter.tool(
    "files.write",
    artifacts={"writes": True, "media_types": ["text/markdown", "text/plain"]},
)
def write(name: str, text: str, ctx: charter.Context) -> dict[str, Any]:
    """Write a text file into the run."""
    assert ctx.artifacts is not None
    stored = ctx.artifacts.put(name, text.encode(), media_type="text/markdown", type="report")
    return {"path": stored.path}


@charter.tool("files.boom", artifacts={"writes": True})
def boom(name: str, ctx: charter.Context) -> dict[str, Any]:
    """Write one file, start another, then fail."""
    assert ctx.artifacts is not None
    ctx.artifacts.put(name, b"complete")
    with ctx.artifacts.open(name + ".part") as w:
        w.write(b"half")
        raise RuntimeError("failed half-way")


@charter.tool("files.undeclared", artifacts={"writes": True, "media_types": ["text/plain"]})
def undeclared(ctx: charter.Context) -> dict[str, Any]:
    """Write a media type the contract does not declare."""
    assert ctx.artifacts is not None
    ctx.artifacts.put("x.png", b"png", media_type="image/png")
    return {}


@charter.tool("files.count", artifacts={"inputs": ["source"]})
def count(source: str, ctx: charter.Context) -> dict[str, Any]:
    """Count the bytes of an input artifact."""
    assert ctx.artifacts is not None
    return {"bytes": len(ctx.artifacts.read(source))}
'''

CHARTER_YAML = """
name: served
tools: {python: [tools.py, files.py]}
profiles:
  all:
    include: [kv.get, kv.put, kv.echo, kv.boom, kv.slow, files.write, files.boom,
              files.undeclared, files.count]
  reader:
    include: [kv.get, kv.echo]
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_files_project(root: Path) -> Project:
    project = write_served_project(root)
    (root / "files.py").write_text(FILES)
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    return project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return write_files_project(tmp_path / "proj")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return write_files_project(tmp_path_factory.mktemp("served-files"))


@pytest.fixture(scope="module")
def server(served: Project) -> Iterator[ThreadServer]:
    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(served.root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        yield live


@pytest.fixture(scope="module")
def clients(served: Project, server: ThreadServer) -> Iterator[dict[str, Client]]:
    made = {name: Client(server.url, key) for name, key in served.keys.items()}
    yield made
    for client in made.values():
        client.close()
