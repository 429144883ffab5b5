"""Live chat servers on loopback: the workflow-copilot example and the key-value project
with a scripted model, each served by a :class:`ThreadServer` whose turn hub runs on a fake
clock (the grace window is driven by the test, never by waiting)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route

from charter.project.init import init_project
from charter.providers.turns import TurnHub
from charter.runtime import open_runtime
from charter.server import create_app
from charter.server.routes.chat import configure_chat
from tests.server._harness import Project, ThreadServer, write_served_project

KV_SCRIPT = """
rules:
  - match: "(?i)store"
    steps:
      - say: "Storing it."
      - call: {id: put, tool: kv_put, arguments: {key: color, value: blue}}
      - say: "The write ended {{put.status}}."
  - match: "(?i)slow"
    steps:
      - say: "Working on it."
      - call: {id: s1, tool: kv_slow, arguments: {seconds: 0.3}}
      - say: "Halfway."
      - call: {id: s2, tool: kv_slow, arguments: {seconds: 0.3}}
      - say: "Done: {{s2.status}}."
  - match: "(?i)linger"
    steps:
      - say: "Lingering."
      - call: {id: l1, tool: kv_slow, arguments: {seconds: 4}}
      - say: "Done: {{l1.status}}."
  - match: ""
    steps: [{say: "Hello from the script."}]
"""
KV_CHAT = """
chat:
  provider: scripted
  script: script.yaml
  profile: all
  grace_s: 300
"""


class FakeClock:
    """The hub's clock: moves only when a test says so."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Live:
    url: str
    root: Path
    keys: dict[str, str]
    clock: FakeClock
    app: FastAPI

    @property
    def hub(self) -> TurnHub:
        hub: TurnHub = self.app.state.charter_chat
        return hub


async def _no_such_route(request: Request) -> None:
    raise HTTPException(status_code=404)


def serve(root: Path, keys: dict[str, str], *, without: tuple[str, ...] = ()) -> Iterator[Live]:
    """Serve ``root``; ``without`` lists paths the app answers as a server from before them
    does (404 ``ROUTE_NOT_FOUND``, the app's own problem), whatever the method."""

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store="sqlite:///.charter/charter.db")

    app = create_app(opener=opener, sse_keepalive_s=0.5)
    for path in without:  # ahead of the real route, so it is never reached
        app.router.routes.insert(0, Route(path, _no_such_route, methods=["GET", "POST"]))
    clock = FakeClock()
    configure_chat(app, clock=clock, sweep_s=0.02)
    with ThreadServer(app) as live:
        yield Live(url=live.url, root=root, keys=keys, clock=clock, app=app)


def write_kv_project(root: Path) -> Project:
    """The key-value project served with the scripted model (``chat.profile: all``, no agents)."""
    project = write_served_project(root)
    (project.root / "script.yaml").write_text(textwrap.dedent(KV_SCRIPT))
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + textwrap.dedent(KV_CHAT))
    return project


@pytest.fixture(scope="module")
def kv_project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return write_kv_project(tmp_path_factory.mktemp("chatkv"))


@pytest.fixture(scope="module")
def kv(kv_project: Project) -> Iterator[Live]:
    yield from serve(kv_project.root, kv_project.keys)


@pytest.fixture(scope="module")
def copilot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("copilot")
    init_project(root, template="workflow-copilot")
    secrets = root / ".charter" / "secrets"
    keys = {n: (secrets / f"{n}.key").read_text().strip() for n in ("alice", "app", "intruder")}
    yield from serve(root, keys)
