"""A credential sent twice is ambiguous, not "the first one wins": two ``Authorization``
headers (or two approval tokens, or two tenants beside one) answer 401 ``AUTH_INVALID`` on the
API and on the MCP mount alike — a proxy in front of the server may have read the other one."""

from __future__ import annotations

import httpx2
import pytest

from charter.client import Client
from tests.server._harness import Project, ThreadServer

MCP_HEADERS = [
    ("Accept", "application/json, text/event-stream"),
    ("Content-Type", "application/json"),
]
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def _refused(answer: httpx2.Response) -> None:
    assert answer.status_code == 401, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["www-authenticate"].startswith("Bearer")
    problem = answer.json()
    assert (problem["code"], problem["reason"]) == ("permission_denied", "AUTH_INVALID")
    assert "Authorization header was sent 2 times" in problem["detail"]


@pytest.mark.parametrize("order", ["intruder first", "intruder second", "same key twice"])
def test_two_authorization_headers_are_refused(
    server: ThreadServer, project: Project, order: str
) -> None:
    app, intruder = f"Bearer {project.keys['app']}", "Bearer not-a-key"
    pair = {
        "intruder first": [intruder, app],
        "intruder second": [app, intruder],
        "same key twice": [app, app],
    }[order]
    sent = [("Authorization", value) for value in pair]
    with httpx2.Client(base_url=server.url, timeout=30, trust_env=False) as http:
        _refused(http.get("/v1/runs", headers=sent))
        _refused(http.post("/v1/runs", json={}, headers=sent))
        _refused(http.post("/mcp/all", json=LIST, headers=[*MCP_HEADERS, *sent]))
        # one header still works, on both
        assert http.get("/v1/runs", headers=[("Authorization", app)]).status_code == 200
        listed = http.post("/mcp/all", json=LIST, headers=[*MCP_HEADERS, ("Authorization", app)])
        assert listed.status_code == 200, listed.text


def test_two_approval_tokens_or_tenants_are_refused(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    ctx = app.resolve_context("all")
    pending = app.call(ctx["context_id"], "kv.put", "dup-tok", {"key": "d", "value": "1"})
    assert pending.approval
    url = f"/v1/approvals/{pending.approval['id']}/approve"
    token = ("X-Charter-Approval-Token", project.approval_token)
    with httpx2.Client(base_url=server.url, timeout=30, trust_env=False) as http:
        for sent in (
            [token, ("X-Charter-Approval-Token", "not-the-token"), ("X-Charter-Tenant", "acme")],
            [token, ("X-Charter-Tenant", "globex"), ("X-Charter-Tenant", "acme")],
        ):
            answer = http.post(url, headers=sent)
            assert answer.status_code == 401, answer.text
            assert answer.json()["reason"] == "AUTH_INVALID"
            assert "was sent 2 times" in answer.json()["detail"]
        assert app.get_approval(pending.approval["id"])["status"] == "pending"  # nothing decided
        decided = http.post(url, headers=[token, ("X-Charter-Tenant", "acme")])
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved"
