"""A run page links a pending call to its approval, and renders the verify result as facts
(issue 23 item 13), through the console on a real loopback server."""

from __future__ import annotations

from charter.client import Client
from tests.console._console import signed_in
from tests.console.test_pages import pending_call
from tests.server._harness import Project, ThreadServer


def test_a_pending_call_links_to_its_approval_and_verify_reads_as_facts(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    _, run_id, approval_id = pending_call(clients, "link-1")
    client = signed_in(server.url, project.keys["alice"])
    page = client.get(f"/console/runs/{run_id}")
    assert page.status_code == 200
    link = f'<a href="/console/approvals#t-{approval_id}" data-testid="call-approval">'
    assert link in page.text
    inbox = client.get("/console/approvals")
    assert f'id="t-{approval_id}"' in inbox.text  # the link's target exists

    verified = client.get(f"/console/runs/{run_id}", params={"verify": "1"})
    assert 'data-testid="verify-result" data-ok="true"' in verified.text
    assert 'data-testid="verify-events">' in verified.text
    section = verified.text.split('data-testid="verify-result"', 1)[1].split("</div>", 1)[0]
    assert "null" not in section
    assert "None" not in section
    assert "{" not in section  # facts, not a JSON dump
    assert 'data-testid="verify-reason"' not in section  # nothing went wrong: no empty rows
