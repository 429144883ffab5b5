"""The console's run page ends runs: an operator cancels a run with a reason (CSRF-checked
form); the run is ``cancelled`` in the ledger, its pending approval rejected, and the form is
gone from the ended run's page."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from charter.client import Client
from charter.runtime import open_runtime
from charter.testing.clock import FakeClock
from tests.console._console import STORE, csrf_of, signed_in
from tests.server._harness import Project, ThreadServer


def test_an_operator_cancels_a_run_from_its_page(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    env = clients["app"].call(ctx["context_id"], "kv.put", "end-1", {"key": "e", "value": "v"})
    assert env.approval is not None
    client = signed_in(server.url, project.keys["alice"])
    page = client.get(f"/console/runs/{ctx['run_id']}")
    assert 'data-testid="end-run-form"' in page.text
    forged = client.post(
        f"/console/runs/{ctx['run_id']}/cancel", data={"csrf_token": "nope", "reason": "x"}
    )
    assert forged.status_code == 403
    assert clients["alice"].get_run(ctx["run_id"])["status"] == "input_required"
    answer = client.post(
        f"/console/runs/{ctx['run_id']}/cancel",
        data={"csrf_token": csrf_of(page.text), "reason": "opened by mistake"},
    )
    assert answer.status_code == 303, answer.text
    ended = client.get(answer.headers["location"])
    assert 'data-testid="end-run-form"' not in ended.text
    assert clients["alice"].get_run(ctx["run_id"])["status"] == "cancelled"
    assert clients["alice"].get_approval(env.approval["id"])["status"] == "rejected"
    assert clients["alice"].verify_run(ctx["run_id"])["ok"] is True
    again = client.post(
        f"/console/runs/{ctx['run_id']}/fail",
        data={"csrf_token": csrf_of(page.text), "reason": "twice"},
    )
    assert again.status_code == 409, again.status_code
    assert "RUN_TERMINAL" in again.text


def test_the_runs_page_hides_idle_closed_session_runs_unless_asked(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """Before: every CLI call and MCP session left an ad-hoc run ``running`` forever and the
    Runs page filled with them."""
    ctx = clients["app"].resolve_context("all")
    done = clients["app"].call(ctx["context_id"], "kv.get", "idle-1", {"key": "e"})
    assert done.status.value == "succeeded", done
    client = signed_in(server.url, project.keys["alice"])
    assert ctx["run_id"] in client.get("/console/runs").text
    asyncio.run(_open_later(project.root))  # a runtime opening an hour on ends idle runs
    assert clients["alice"].get_run(ctx["run_id"])["status"] == "completed"
    assert ctx["run_id"] not in client.get("/console/runs").text
    assert ctx["run_id"] in client.get("/console/runs", params={"ended": "1"}).text


async def _open_later(root: Path) -> None:
    later = datetime.now(UTC) + timedelta(hours=1, minutes=1)
    async with open_runtime(root, store=STORE, clock=FakeClock(start=later, step=timedelta(0))):
        pass
