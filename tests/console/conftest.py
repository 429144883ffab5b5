from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.console._console import OPEN, STORE
from tests.console._copilot import Copilot, write_copilot_project
from tests.server._harness import Project, ThreadServer, write_served_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return write_served_project(tmp_path_factory.mktemp("console"))


def console_app(root: Path) -> FastAPI:
    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=STORE)

    made = create_app(opener=opener, sse_keepalive_s=0.5)
    for route in made.routes:  # the live lists re-read the store often in tests
        sub = getattr(route, "app", None)
        if getattr(route, "path", "") == "/console" and sub is not None:
            sub.state.console_poll_s = 0.2
    return made


@pytest.fixture(scope="module")
def app(project: Project) -> FastAPI:
    return console_app(project.root)


@pytest.fixture(scope="module")
def server(app: FastAPI) -> Iterator[ThreadServer]:
    with ThreadServer(app) as live:
        yield live


@pytest.fixture(scope="module")
def clients(project: Project, server: ThreadServer) -> Iterator[dict[str, Client]]:
    made = {name: Client(server.url, key) for name, key in project.keys.items()}
    yield made
    for client in made.values():
        client.close()


@pytest.fixture(scope="module")
def copilot(tmp_path_factory: pytest.TempPathFactory) -> Copilot:
    """The workflow-copilot example with two more operators (see ``_copilot``)."""
    return write_copilot_project(tmp_path_factory.mktemp("copilot"))


@pytest.fixture(scope="module")
def copilot_app(copilot: Copilot) -> FastAPI:
    return console_app(copilot.root)


@pytest.fixture(scope="module")
def copilot_server(copilot_app: FastAPI) -> Iterator[ThreadServer]:
    with ThreadServer(copilot_app) as live:
        yield live


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()
