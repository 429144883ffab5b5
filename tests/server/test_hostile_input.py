"""A careless or hostile client against a live server: ids and strings a JSON decoder lets
through but no store can hold, bodies the framework fails to parse, filters out of range.
Each answer is a 4xx problem naming the field, never a 500 and never a half-written call."""

from __future__ import annotations

import json
import socket
import time

import httpx2
import pytest

from charter.client import Client
from tests.server._harness import Project, ThreadServer


def raw(server: ThreadServer, key: str) -> httpx2.Client:
    return httpx2.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
        timeout=30,
    )


@pytest.mark.parametrize("member", ["tool", "call_id", "approval_id", "task_id"])
def test_a_lone_surrogate_in_a_call_member_is_a_422_naming_it(
    server: ThreadServer, project: Project, clients: dict[str, Client], member: str
) -> None:
    ctx = clients["app"].resolve_context("all")
    members = {"tool": '"kv.put"', "call_id": f'"sur-{member}"'}
    members[member] = '"x\\ud800"'
    body = ", ".join(f'"{k}": {v}' for k, v in members.items())
    body = "{" + body + ', "arguments": {"key": "k", "value": "v"}}'
    with raw(server, project.keys["app"]) as http:
        answer = http.post(f"/v1/contexts/{ctx['context_id']}/calls", content=body.encode())
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        problem = answer.json()
        assert problem["reason"] == "REQUEST_INVALID"
        assert member in problem["detail"]
        assert "surrogate" in problem["detail"]
        # nothing was recorded for the refused call
        assert http.get(f"/v1/calls/{ctx['context_id']}/sur-{member}").status_code == 404


@pytest.mark.parametrize(
    "body",
    [b'{"profile": "\xff"}', b'{"profile": "all", "attachments": ' + b"[" * 50_000 + b"]"],
)
def test_a_body_the_framework_cannot_parse_is_body_malformed(
    server: ThreadServer, project: Project, body: bytes
) -> None:
    with raw(server, project.keys["app"]) as http:
        for path in ("/v1/contexts", "/v1/runs"):
            answer = http.post(path, content=body)
            assert answer.status_code == 400, answer.text
            assert answer.json()["reason"] == "BODY_MALFORMED"


def test_proposals_refuse_an_unknown_status_filter(server: ThreadServer, project: Project) -> None:
    with raw(server, project.keys["app"]) as http:
        answer = http.get("/v1/proposals", params={"status": "bogus"})
        assert answer.status_code == 422, answer.text
        problem = answer.json()
        assert problem["reason"] == "REQUEST_INVALID"
        assert problem["errors"][0]["loc"] == ["query", "status"]
        assert http.get("/v1/proposals", params={"status": "approved"}).status_code == 200


def _get_raw(server: ThreadServer, path: str, headers: list[bytes]) -> tuple[bytes, bytes]:
    """One GET whose header bytes go out as they are (latin-1 bytes a client library
    would refuse to send); returns (status line, body)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\n".encode()
            + b"".join(h + b"\r\n" for h in headers)
            + b"Connection: close\r\n\r\n"
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], body


@pytest.mark.parametrize("accept", [b"application/json", b"text/event-stream"])
@pytest.mark.parametrize("value", [b"\xb2", b"\xb9\xb2", b"abc", b"-5", b"1" * 40, b"0x10"])
def test_a_garbage_last_event_id_is_a_422_naming_the_header(
    server: ThreadServer, project: Project, clients: dict[str, Client], accept: bytes, value: bytes
) -> None:
    run = clients["app"].create_run()
    status, body = _get_raw(
        server,
        f"/v1/runs/{run['run_id']}/events",
        [
            b"Authorization: Bearer " + project.keys["app"].encode(),
            b"Accept: " + accept,
            b"Last-Event-ID: " + value,
        ],
    )
    assert status == b"HTTP/1.1 422 Unprocessable Entity", (status, body)
    problem = json.loads(body)
    assert problem["reason"] == "REQUEST_INVALID"
    assert "Last-Event-ID" in problem["detail"]


def test_a_numeric_last_event_id_still_resumes(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    run = clients["app"].create_run()
    status, body = _get_raw(
        server,
        f"/v1/runs/{run['run_id']}/events",
        [b"Authorization: Bearer " + project.keys["app"].encode(), b"Last-Event-ID: 2"],
    )
    assert status == b"HTTP/1.1 200 OK"
    assert [e["seq"] for e in json.loads(body)["events"]] == [3]


def test_head_answers_like_get_without_a_body(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    run = clients["app"].create_run()
    other = clients["gapp"].create_run()
    with raw(server, project.keys["app"]) as http:
        health = http.head("/healthz")
        assert health.status_code == 200
        assert health.content == b""
        got = http.get(f"/v1/runs/{run['run_id']}")
        head = http.head(f"/v1/runs/{run['run_id']}")
        assert head.status_code == 200
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.headers["content-length"] == got.headers["content-length"]
        foreign = http.head(f"/v1/runs/{other['run_id']}")
        assert foreign.status_code == 404  # like a missing one, as GET
        assert http.head("/v1/contexts").status_code == 405  # POST only
    with httpx2.Client(base_url=server.url, timeout=30) as anonymous:
        assert anonymous.head(f"/v1/runs/{run['run_id']}").status_code == 401


def test_an_invalid_traceparent_is_not_continued(server: ThreadServer) -> None:
    """W3C trace context: an all-zero trace id or version ``ff`` is invalid and starts a new
    trace; a valid one is continued."""
    valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with httpx2.Client(base_url=server.url, timeout=30) as http:
        ok = http.get("/healthz", headers={"traceparent": valid})
        assert ok.headers["x-charter-trace-id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
        for bad in (
            "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ):
            answer = http.get("/healthz", headers={"traceparent": bad})
            trace = answer.headers["x-charter-trace-id"]
            assert trace not in ("0" * 32, "4bf92f3577b34da6a3ce929d0e0e4736"), bad


def _requests_by_status(server: ThreadServer, route_part: str) -> dict[str, float]:
    text = httpx2.get(f"{server.url}/metrics", timeout=30).text
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("charter_http_requests_total{") and route_part in line:
            status = line.split('status="', 1)[1].split('"', 1)[0]
            found[status] = found.get(status, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


def test_a_client_gone_mid_upload_is_no_server_error(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """A client that drops the connection halfway through a body: nothing registered, no
    partial file, and the server counts it as the client's doing (499), not a 500."""
    run = clients["app"].create_run()
    before = _requests_by_status(server, "artifacts")
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST /v1/runs/{run['run_id']}/artifacts?name=partial.txt HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: Bearer {project.keys['app']}\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n".encode()
            + b"x" * 1000
        )
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    after = before
    while time.monotonic() < deadline:
        after = _requests_by_status(server, "artifacts")
        if after != before:
            break
        time.sleep(0.1)
    assert after.get("499", 0) == before.get("499", 0) + 1, after
    assert after.get("500", 0) == before.get("500", 0)
    assert clients["app"].list_artifacts(run["run_id"]) == []
    assert not list(project.root.rglob("partial*"))


def test_a_client_gone_during_a_slow_call_counts_as_499(
    server: ThreadServer, clients: dict[str, Client], project: Project
) -> None:
    """A client that hangs up while its call runs gets no answer: the request is the
    client's 499 in the metrics, not a 200 nobody received (the call itself completes)."""
    ctx = clients["app"].resolve_context("all")
    route = "/contexts/{context_id}/calls"
    before = _requests_by_status(server, route)
    body = {"tool": "kv.slow", "call_id": "gone-1", "arguments": {"seconds": 1.0}}
    with pytest.raises(httpx2.TimeoutException):
        httpx2.post(
            f"{server.url}/v1/contexts/{ctx['context_id']}/calls",
            json=body,
            headers={"Authorization": f"Bearer {project.keys['app']}"},
            timeout=0.3,
            trust_env=False,
        )
    deadline = time.monotonic() + 10
    after = before
    while time.monotonic() < deadline:
        after = _requests_by_status(server, route)
        if after != before:
            break
        time.sleep(0.1)
    assert after.get("499", 0) == before.get("499", 0) + 1, after
    assert after.get("200", 0) == before.get("200", 0), after
    assert clients["app"].get_call(ctx["context_id"], "gone-1")["state"] == "succeeded"


def test_a_huge_call_id_is_not_echoed_whole(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """The envelope of a 500,000-character call id used to carry it whole (a 500 kB answer,
    and the same in the ledger's audit record)."""
    ctx = clients["app"].resolve_context("all")
    body = {"tool": "kv.get", "call_id": "x" * 500_000, "arguments": {"key": "k"}}
    with raw(server, project.keys["app"]) as http:
        answer = http.post(f"/v1/contexts/{ctx['context_id']}/calls", json=body)
        assert answer.status_code == 422, answer.text[:300]
        assert answer.json()["error"]["reason"] == "CALL_ID_INVALID"
        assert len(answer.content) < 2000
