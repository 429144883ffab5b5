"""A request body with a ``Content-Encoding`` other than ``identity`` is ``415
UNSUPPORTED_MEDIA_TYPE`` (with ``Accept-Encoding: identity``) on every route that takes a body —
the API's JSON operations, an artifact upload, the ``/mcp/{profile}`` mount — before anything
is read or recorded. Before: nothing decompressed it and its bytes were read as JSON, so a
gzip-compressed call was '400 BODY_MALFORMED: the body is not UTF-8 JSON', and an upload was
stored compressed under the client's name."""

from __future__ import annotations

import gzip
import json
import zlib

import httpx2
import pytest

from charter.client import Client
from tests.server._harness import Project, ThreadServer
from tests.server.test_json_bodies import json_operations

CANARY = "coding-canary-7d2e41"  # a coding nobody registered: never echoed back
BODY = json.dumps({"profile": "reader", "reason": "r"}).encode()


def _http(server: ThreadServer, key: str) -> httpx2.Client:
    return httpx2.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def check_refused(answer: httpx2.Response, named: str) -> None:
    assert answer.status_code == 415, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["accept-encoding"] == "identity"
    problem = answer.json()
    assert problem["type"] == "urn:charter:problem:UNSUPPORTED_MEDIA_TYPE"
    assert (problem["code"], problem["reason"]) == ("invalid_input", "UNSUPPORTED_MEDIA_TYPE")
    assert problem["detail"] == (
        f"the body is encoded ({named}): send it without a Content-Encoding "
        "(only identity is accepted)"
    )
    assert CANARY not in answer.text


CODED = [
    ("gzip", gzip.compress(BODY), "gzip"),
    ("GZip", gzip.compress(BODY), "gzip"),
    ("deflate", zlib.compress(BODY), "deflate"),
    ("br", b"\x8b\x02\x80" + BODY + b"\x03", "br"),  # any bytes: it is refused unread
    ("identity, gzip", gzip.compress(BODY), "gzip"),
    (CANARY, BODY, "a coding that is not registered"),
]


@pytest.mark.parametrize(("coding", "body", "named"), CODED)
def test_a_coded_body_is_415_on_every_json_operation(
    server: ThreadServer, project: Project, coding: str, body: bytes, named: str
) -> None:
    headers = {"content-type": "application/json", "content-encoding": coding}
    with _http(server, project.keys["alice"]) as http:
        runs = len(http.get("/v1/runs", params={"limit": 1000}).json())
        operations = json_operations(server)
        assert len(operations) >= 13
        for path, _ in operations:
            check_refused(http.post(path, content=body, headers=headers), named)
        # nothing recorded, and the connection still serves the next request
        assert len(http.get("/v1/runs", params={"limit": 1000}).json()) == runs


def test_a_coded_call_is_not_recorded_and_the_plain_one_runs(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    url = f"/v1/contexts/{ctx['context_id']}/calls"
    call = b'{"tool": "kv.echo", "call_id": "gz-1", "arguments": {"payload": {}}}'
    with _http(server, project.keys["app"]) as http:
        for headers in (
            {"content-type": "application/json", "content-encoding": "gzip"},
            {"content-encoding": "gzip"},  # a call with no Content-Type is read as JSON
        ):
            check_refused(http.post(url, content=gzip.compress(call), headers=headers), "gzip")
        assert http.get(f"/v1/calls/{ctx['context_id']}/gz-1").status_code == 404
        for coding in ("identity", "Identity", "identity , identity"):
            headers = {"content-type": "application/json", "content-encoding": coding}
            sent = http.post(url, content=call, headers=headers)
            assert sent.status_code == 200, sent.text
            assert sent.json()["status"] == "succeeded"


def test_every_content_encoding_header_counts(server: ThreadServer, project: Project) -> None:
    """Two headers, ``identity`` then ``gzip``: the body is gzip-coded (RFC 9110 §5.3)."""
    with _http(server, project.keys["app"]) as http:
        answer = http.post(
            "/v1/contexts",
            content=gzip.compress(BODY),
            headers=[
                ("content-type", "application/json"),
                ("content-encoding", "identity"),
                ("content-encoding", "gzip"),
            ],
        )
        check_refused(answer, "gzip")


def test_a_coded_upload_is_refused_not_stored(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    url = f"/v1/runs/{ctx['run_id']}/artifacts"
    with _http(server, project.keys["app"]) as http:
        coded = http.post(
            url,
            params={"name": "notes.txt"},
            content=gzip.compress(b"hello"),
            headers={"content-type": "text/plain", "content-encoding": "gzip"},
        )
        check_refused(coded, "gzip")
        listed = http.get(url)
        assert listed.status_code == 200, listed.text
        assert "notes.txt" not in listed.text


@pytest.mark.anyio
async def test_the_mcp_mount_refuses_a_coded_body(server: ThreadServer, project: Project) -> None:
    message = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    headers = {
        "Authorization": f"Bearer {project.keys['app']}",
        "Content-Type": "application/json",
        "Accept": "application/json",
    }
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        coded = await http.post(
            "/mcp/all",
            content=gzip.compress(message),
            headers={**headers, "Content-Encoding": "gzip"},
        )
        check_refused(coded, "gzip")
        plain = await http.post(
            "/mcp/all", content=message, headers={**headers, "Content-Encoding": "identity"}
        )
        assert plain.status_code == 200, plain.text
        assert plain.json()["result"]["tools"]
