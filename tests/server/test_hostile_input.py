"""A careless or hostile client against a live server: ids and strings a JSON decoder lets
through but no store can hold, bodies the framework fails to parse, filters out of range.
Each answer is a 4xx problem naming the field, never a 500 and never a half-written call."""

from __future__ import annotations

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
