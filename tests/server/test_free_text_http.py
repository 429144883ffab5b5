"""Free text over HTTP is refused as on every other surface: a reason past 2048 characters is
``422 REASON_TOO_LONG`` and an objective past 4096 ``422 OBJECTIVE_TOO_LONG`` (docs/deploy.md
"Limits", docs/console.md), naming the field and the limit, never the text; nothing recorded.

Before: the API's schema refused them first, as a bare ``REQUEST_INVALID`` with a pydantic
``string_too_long`` error — a client could not tell a note too long from any other malformed
body, and the API was the one surface without the documented reason."""

from __future__ import annotations

import httpx2

from charter.client import Client
from tests.server._harness import Project, ThreadServer

NOTE = "n" * 2049


def refused(answer: httpx2.Response, reason: str, field: str, limit: int) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert (problem["reason"], problem["code"]) == (reason, "invalid_input"), problem
    assert f"{field} is longer than {limit} characters" in problem["detail"], problem
    assert "nnnn" not in answer.text
    assert "oooo" not in answer.text


def test_a_reason_too_long_is_reason_too_long_and_decides_nothing(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    ctx = app.resolve_context("all")
    pending = app.call(ctx["context_id"], "kv.put", "long-note", {"key": "k", "value": "v"})
    assert pending.approval is not None
    approval_id = pending.approval["id"]
    headers = {"Authorization": f"Bearer {project.keys['alice']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as alice:
        for verb in ("approve", "reject"):
            answer = alice.post(f"/v1/approvals/{approval_id}/{verb}", json={"reason": NOTE})
            refused(answer, "REASON_TOO_LONG", "reason", 2048)
        assert alice.get(f"/v1/approvals/{approval_id}").json()["status"] == "pending"
        answer = alice.post(f"/v1/runs/{ctx['run_id']}/cancel", json={"reason": NOTE})
        refused(answer, "REASON_TOO_LONG", "reason", 2048)
        assert alice.get(f"/v1/runs/{ctx['run_id']}").json()["status"] != "cancelled"
        ok = alice.post(f"/v1/approvals/{approval_id}/reject", json={"reason": NOTE[:2048]})
        assert ok.status_code == 200, ok.text


def test_an_objective_too_long_is_objective_too_long_and_resolves_nothing(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    before = len(clients["app"].runs(limit=1000))
    headers = {"Authorization": f"Bearer {project.keys['app']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as app:
        answer = app.post("/v1/contexts", json={"profile": "all", "objective": "o" * 4097})
        refused(answer, "OBJECTIVE_TOO_LONG", "objective", 4096)
    assert len(clients["app"].runs(limit=1000)) == before
