"""A client that sends a request body slowly (slowloris) used to hold the request, and its
buffer, for as long as it liked (over 90 s against ``charter serve``): now a body that has not
arrived whole within ``body_timeout_s`` is ``408 BODY_TIMEOUT`` and nothing is recorded."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import Project, ThreadServer


@pytest.fixture
def quick(project: Project) -> Iterator[ThreadServer]:
    root: Path = project.root

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener, body_timeout_s=1.0)) as live:
        yield live


def test_a_body_sent_too_slowly_is_408_and_records_nothing(
    quick: ThreadServer, project: Project
) -> None:
    host, port = quick.url.removeprefix("http://").split(":")
    with Client(quick.url, project.keys["app"]) as client:
        before = len(client.runs())
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(
            b"POST /v1/runs HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {project.keys['app']}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        started = time.monotonic()
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        took = time.monotonic() - started
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer[:300]
    assert json.loads(body)["reason"] == "BODY_TIMEOUT"
    assert took < 10
    with Client(quick.url, project.keys["app"]) as client:
        assert len(client.runs()) == before
