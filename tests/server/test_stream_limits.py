"""Open event streams are capped per tenant and per principal (``limits.streams``), on a real
server: a stream over the cap is refused before it starts (429 ``TOO_MANY_STREAMS`` with
``Retry-After``), another tenant still gets its streams, and a slot comes back however a
stream ends — the client closing it, the client's connection reset, the run ending, the
server stopping — so a flood of abandoned streams never locks a tenant out.

Covered: the run events stream, the chat stream (``POST /v1/chat``) and the console's
approvals stream."""

from __future__ import annotations

import gc
import socket
import struct
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from charter.client import Client
from charter.deploy.stream_limits import StreamLimits
from charter.kernel.principals import Principal, PrincipalKind
from charter.runtime import open_runtime
from charter.server import create_app
from charter.server.state import ServerState
from charter.server.streams import HeldStream, StreamSlots
from tests.console._console import OPEN, signed_in
from tests.server._harness import ThreadServer, write_served_project

LIMITS = """
limits:
  streams: {tenant: 3, principal: 2}
chat:
  provider: scripted
  script: script.yaml
  profile: all
  grace_s: 300
"""
SCRIPT = """
rules:
  - match: "(?i)store"
    steps:
      - say: "Storing it."
      - call: {id: put, tool: kv_put, arguments: {key: color, value: blue}}
      - say: "The write ended {{put.status}}."
  - match: ""
    steps: [{say: "Hello."}]
"""


@dataclass
class Limited:
    url: str
    keys: dict[str, str]
    app: FastAPI

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.charter
        return state

    def open_count(self, tenant: str, principal: str | None = None) -> int:
        return self.state.streams.open_count(tenant, principal)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Limited]:
    project = write_served_project(tmp_path_factory.mktemp("streams"))
    (project.root / "script.yaml").write_text(textwrap.dedent(SCRIPT))
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + textwrap.dedent(LIMITS))

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project.root, store="sqlite:///.charter/charter.db")

    app = create_app(opener=opener, sse_keepalive_s=0.5)
    with ThreadServer(app) as live:
        yield Limited(url=live.url, keys=project.keys, app=app)
    for client in OPEN:
        client.close()
    OPEN.clear()


@pytest.fixture(scope="module")
def runs(limited: Limited) -> dict[str, str]:
    """One open run per tenant: acme's (app's) and globex's (bob's)."""
    made = {}
    for name in ("app", "bob"):
        with Client(limited.url, limited.keys[name]) as client:
            made[name] = client.create_run()["run_id"]
    return made


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextmanager
def _events(live: Limited, who: str, run_id: str) -> Iterator[httpx2.Response]:
    """``GET /v1/runs/{id}/events`` as SSE on a connection of its own, open until exit."""
    headers = {"Authorization": f"Bearer {live.keys[who]}", "Accept": "text/event-stream"}
    with (
        httpx2.Client(timeout=30) as http,
        http.stream("GET", f"{live.url}/v1/runs/{run_id}/events", headers=headers) as response,
    ):
        if response.status_code != 200:
            response.read()
        yield response


def _refused(response: httpx2.Response, scope: str) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = response.json()
    assert problem["reason"] == "TOO_MANY_STREAMS"
    assert problem["code"] == "resource_limit"
    assert problem["retryable"] is True
    assert f"limits.streams.{scope}" in problem["detail"]
    assert f"the {scope}'s limit is" in problem["detail"]
    for secret in ("acme", "globex", "alice", "app"):  # names no tenant, no principal
        assert secret not in problem["detail"]
    return problem


def test_run_event_streams_are_capped_per_principal_and_per_tenant(
    limited: Limited, runs: dict[str, str]
) -> None:
    acme, globex = runs["app"], runs["bob"]
    with ExitStack() as stack:
        for _ in range(2):
            assert stack.enter_context(_events(limited, "app", acme)).status_code == 200
        assert limited.open_count("acme", "app") == 2
        with _events(limited, "app", acme) as third:
            assert _refused(third, "principal")["detail"].endswith("retry after 5 s")
        # the JSON page of the same events is not a stream: not capped
        with Client(limited.url, limited.keys["app"]) as app:
            assert app.events(acme)["run_id"] == acme
        # alice is acme too: one more makes the tenant's three, the next is over it
        assert stack.enter_context(_events(limited, "alice", acme)).status_code == 200
        with _events(limited, "alice", acme) as over:
            _refused(over, "tenant")
        # globex is another tenant: its streams are its own
        with _events(limited, "bob", globex) as other:
            assert other.status_code == 200
            assert next(other.iter_lines()).startswith(":")
        metrics = httpx2.get(f"{limited.url}/metrics").text
        assert 'charter_stream_refusals_total{scope="principal"}' in metrics
        assert 'charter_stream_refusals_total{scope="tenant"}' in metrics
        assert 'charter_streams_open{stream="runs"} 3.0' in metrics
    # every stream closed by its client: every slot is back
    _wait(lambda: limited.open_count("acme") == 0, "acme's slots to come back")
    assert limited.open_count("globex") == 0
    with ExitStack() as stack:
        for _ in range(2):
            assert stack.enter_context(_events(limited, "app", acme)).status_code == 200


def _raw_stream(live: Limited, who: str, path: str) -> tuple[socket.socket, bytes]:
    host, port = live.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {live.keys[who]}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection"
        head += chunk
    return sock, head


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a crashed client or a dropped network does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_streams_reset_by_their_clients_give_their_slots_back(
    limited: Limited, runs: dict[str, str]
) -> None:
    path = f"/v1/runs/{runs['app']}/events"
    _wait(lambda: limited.open_count("acme") == 0, "no acme stream open")
    for _ in range(10):  # ten floods of abandoned streams: not one slot leaks
        socks = [_raw_stream(limited, "app", path) for _ in range(2)]
        assert all(head.startswith(b"HTTP/1.1 200") for _, head in socks)
        over, head = _raw_stream(limited, "app", path)
        assert head.startswith(b"HTTP/1.1 429")
        assert b"retry-after: 5" in head.lower()
        over.close()
        for sock, _ in socks:
            _reset(sock)
        _wait(lambda: limited.open_count("acme") == 0, "the reset streams' slots")
    with ExitStack() as stack:
        for _ in range(2):
            assert stack.enter_context(_events(limited, "app", runs["app"])).status_code == 200


def test_a_stream_ended_by_its_run_gives_its_slot_back(limited: Limited) -> None:
    with (
        Client(limited.url, limited.keys["app"]) as app,
        Client(limited.url, limited.keys["alice"]) as alice,
    ):
        run_id = app.create_run()["run_id"]
        _wait(lambda: limited.open_count("acme") == 0, "no acme stream open")
        with _events(limited, "app", run_id) as stream:
            assert stream.status_code == 200
            assert limited.open_count("acme", "app") == 1
            alice.cancel_run(run_id, reason="the stream test ends it")
            lines = list(stream.iter_lines())  # the server ends the stream after the status
            assert any("cancelled" in line for line in lines)
            _wait(lambda: limited.open_count("acme") == 0, "the ended stream's slot")


def test_chat_streams_are_capped_and_a_refused_one_starts_no_turn(limited: Limited) -> None:
    headers = {"Authorization": f"Bearer {limited.keys['app']}", "Accept": "text/event-stream"}
    body = {"message": "store this"}  # the turn waits for an approval: its stream stays open
    _wait(lambda: limited.open_count("acme") == 0, "no acme stream open")

    def post(http: httpx2.Client) -> Any:
        return http.stream("POST", f"{limited.url}/v1/chat", headers=headers, json=body)

    with ExitStack() as stack:
        for _ in range(2):
            http = stack.enter_context(httpx2.Client(timeout=30))
            opened = stack.enter_context(post(http))
            assert opened.status_code == 200
            assert opened.headers["x-conversation-id"]
        hub = limited.app.state.charter_chat
        turns = len(hub.conversations)
        with httpx2.Client(timeout=30) as http, post(http) as third:
            third.read()
            _refused(third, "principal")
            assert "x-conversation-id" not in third.headers
        assert len(hub.conversations) == turns, "a refused stream started a turn"
        # bob (globex) still chats
        bob = {**headers, "Authorization": f"Bearer {limited.keys['bob']}"}
        with (
            httpx2.Client(timeout=30) as http,
            http.stream("POST", f"{limited.url}/v1/chat", headers=bob, json=body) as his,
        ):
            assert his.status_code == 200
    _wait(lambda: limited.open_count("acme") == 0, "the chat streams' slots")
    with httpx2.Client(timeout=30) as http, post(http) as again:
        assert again.status_code == 200


def test_console_streams_are_capped_with_an_error_page(limited: Limited) -> None:
    _wait(lambda: limited.open_count("acme") == 0, "no acme stream open")
    alice = signed_in(limited.url, limited.keys["alice"])
    with ExitStack() as stack:
        for _ in range(2):
            opened = stack.enter_context(alice.stream("GET", "/console/approvals/stream"))
            assert opened.status_code == 200
        with alice.stream("GET", "/console/approvals/stream") as third:
            third.read()
            assert third.status_code == 429
            assert third.headers["retry-after"] == "5"
            assert third.headers["content-type"].startswith("text/html")
            assert "TOO_MANY_STREAMS" in third.text
            assert "limits.streams.principal" in third.text
    _wait(lambda: limited.open_count("acme") == 0, "the console streams' slots")
    with alice.stream("GET", "/console/approvals/stream") as again:
        assert again.status_code == 200


def test_a_stopping_server_gives_every_slot_back(tmp_path_factory: pytest.TempPathFactory) -> None:
    project = write_served_project(tmp_path_factory.mktemp("stopping"))

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project.root, store="sqlite:///.charter/charter.db")

    app = create_app(opener=opener, sse_keepalive_s=0.5)
    with ThreadServer(app) as live:
        with Client(live.url, project.keys["app"]) as client:
            run_id = client.create_run()["run_id"]
        path = f"/v1/runs/{run_id}/events"
        held = Limited(url=live.url, keys=project.keys, app=app)
        sock, head = _raw_stream(held, "app", path)
        assert head.startswith(b"HTTP/1.1 200")
        assert held.open_count("acme") == 1
        state = held.state
    # the server stopped with the stream open (its client never left)
    sock.close()
    assert state.streams.open_count("acme") == 0


def test_an_answer_never_served_gives_its_slot_back() -> None:
    """A stream's answer dropped before the server ever calls it (a failure between the route
    and the response) still releases its slot when it is collected."""
    slots = StreamSlots(StreamLimits(tenant=1, principal=1))
    who = Principal(
        name="app", tenant="acme", kind=PrincipalKind.APPLICATION, permissions=frozenset()
    )

    async def frames() -> AsyncIterator[bytes]:
        yield b": hello\n\n"

    answer = HeldStream(frames(), slot=slots.open(who, "runs"))
    assert slots.open_count("acme") == 1
    del answer
    gc.collect()
    assert slots.open_count("acme") == 0
    slots.open(who, "runs").release()  # admitted again; releasing twice is harmless
    assert slots.open_count("acme", "app") == 0
