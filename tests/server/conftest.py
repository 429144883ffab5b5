from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import Project, ThreadServer, write_served_project


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return write_served_project(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def server(project: Project) -> Iterator[ThreadServer]:
    root: Path = project.root

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        yield live


@pytest.fixture(scope="module")
def clients(project: Project, server: ThreadServer) -> Iterator[dict[str, Client]]:
    made = {name: Client(server.url, key) for name, key in project.keys.items()}
    yield made
    for client in made.values():
        client.close()
