"""The console's model-disclosure page: offered against reported for a run, with a report
naming a tool the context never offered flagged; another tenant's run answers 404."""

from __future__ import annotations

from charter.client import Client
from tests.console._console import signed_in
from tests.server._harness import Project, ThreadServer


def test_the_disclosure_page_flags_a_tool_reported_but_never_offered(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    ctx = app.resolve_context("reader")
    app.report_disclosure(
        ctx["context_id"],
        tools=[{"id": "kv.get", "version": "1.0.0"}, {"id": "kv.put", "version": "1.0.0"}],
        schema_digest=ctx["schema_digest"],
        tokens=64,
        request_id="req-7",
    )
    alice = signed_in(server.url, project.keys["alice"])
    run_page = alice.get(f"/console/runs/{ctx['run_id']}")
    assert f'href="/console/runs/{ctx["run_id"]}/disclosure"' in run_page.text
    page = alice.get(f"/console/runs/{ctx['run_id']}/disclosure")
    assert page.status_code == 200
    assert 'data-flagged="true"' in page.text
    assert 'data-flag="reported_not_offered"' in page.text
    assert "Reported but never offered:" in page.text
    assert "<code>kv.put</code>" in page.text
    assert 'data-flag="offered_not_disclosed"' in page.text  # kv.echo was never sent
    assert "<code>kv.echo</code>" in page.text
    bob = signed_in(server.url, project.keys["bob"])  # another tenant's operator
    assert bob.get(f"/console/runs/{ctx['run_id']}/disclosure").status_code == 404
