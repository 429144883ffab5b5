"""A row looked up by its own id (a context, an approval, a proposal, a call by its call id)
whose row was deleted — or whose id was changed — outside Charter: the run it belonged to is
verified and refused as damaged (``RUN_LEDGER_INVALID``, ``SNAPSHOT_DIVERGENCE``), to the
tenant its ledger names, instead of answering that the context, the approval or the proposal
never existed. The ``ledger_edits`` triggers keep the deleted row's id (migration 15 on
SQLite, 14 on PostgreSQL); see docs/ledger.md, "Run-time trust"."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.errors import Failure
from charter.kernel.envelope import CallStatus
from charter.proposals.service import ProposalService
from charter.runtime import open_runtime
from tests.console.conftest import console_app
from tests.kernel._project import runs_of, two_runs, write_runtime_project
from tests.ledger._backends import Backend, sqlite_backend
from tests.server._harness import ThreadServer, write_served_project


def _refused(error: object) -> None:
    assert isinstance(error, dict), error
    assert error["reason"] == "RUN_LEDGER_INVALID", error
    assert "(SNAPSHOT_DIVERGENCE" in (error.get("message") or error["detail"]), error


CONTEXT_GONE = {
    "deleted": "DELETE FROM contexts WHERE context_id = ?",
    "renamed": "UPDATE contexts SET context_id = context_id || 'x' WHERE context_id = ?",
}


@pytest.mark.anyio
@pytest.mark.parametrize("how", sorted(CONTEXT_GONE))
async def test_a_context_whose_row_is_gone_refuses_its_run(
    tmp_path: Path, how: str, backend: Backend
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as writer:
        runs = await two_runs(writer)
    edit(CONTEXT_GONE[how], runs["damaged_ctx"])
    async with open_runtime(project, store=url) as rt:  # a new process: nothing in memory
        call = await rt.call(runs["damaged_ctx"], "kv.get", "c9", {"key": "k"}, as_="app")
        assert call.status is CallStatus.FAILED, call
        _refused(call.error)
        with pytest.raises(Failure) as caught:
            await rt.get_context(runs["damaged_ctx"], tenant="acme")
        _refused({"reason": caught.value.reason, "message": str(caught.value)})
        with pytest.raises(Failure) as caught:
            await rt.resolve_call(
                runs["damaged_ctx"], "c1", outcome="failed", reason="x", as_="alice"
            )
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        # another tenant is told nothing of it
        assert await rt.get_context(runs["damaged_ctx"], tenant="globex") is None
        # an id that never existed is still just not found
        assert await rt.get_context("ctx-000000000000", tenant="acme") is None
        assert runs_of(project, "kv.get") == 2  # nothing dispatched
        other = await rt.call(runs["intact_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert other.status is CallStatus.SUCCEEDED, other


@pytest.mark.anyio
async def test_a_context_row_deleted_under_a_live_process_refuses_its_run(
    tmp_path: Path, backend: Backend
) -> None:
    """The process verified the run and read its rows, but never held the context."""
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as writer:
        runs = await two_runs(writer)
    async with open_runtime(project, store=url) as rt:
        assert (await rt.run(runs["damaged"])) is not None
        edit("DELETE FROM contexts WHERE run_id = ?", runs["damaged"])
        again = await rt.call(runs["damaged_ctx"], "kv.get", "c9", {"key": "k"}, as_="app")
        assert again.status is CallStatus.FAILED, again
        _refused(again.error)
        assert runs_of(project, "kv.get") == 2


def test_a_deleted_context_over_http_and_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = write_served_project(tmp_path / "served")
    app_key, bob = served.keys["app"], served.keys["bob"]
    with ThreadServer(console_app(served.root)) as live:
        http = httpx2.Client(base_url=live.url, headers={"Authorization": f"Bearer {app_key}"})
        ctx = http.post("/v1/contexts", json={"profile": "all"}).json()
        call = {"tool": "kv.get", "arguments": {"key": "k"}, "call_id": "c1"}
        done = http.post(f"/v1/contexts/{ctx['context_id']}/calls", json=call)
        assert done.status_code == 200, done.text
        http.close()
    sqlite_backend(served.root / ".charter" / "charter.db").edit(
        "DELETE FROM contexts WHERE context_id = ?", ctx["context_id"]
    )
    with ThreadServer(console_app(served.root)) as live:
        http = httpx2.Client(base_url=live.url, headers={"Authorization": f"Bearer {app_key}"})
        got = http.get(f"/v1/contexts/{ctx['context_id']}")
        assert got.status_code == 500, got.text
        _refused(got.json())
        answered = http.post(
            f"/v1/contexts/{ctx['context_id']}/calls", json=call | {"call_id": "c2"}
        )
        body = answered.json()
        _refused(body.get("error") or body)
        theirs = httpx2.get(
            f"{live.url}/v1/contexts/{ctx['context_id']}",
            headers={"Authorization": f"Bearer {bob}"},
        )
        assert theirs.status_code == 404, theirs.text
        http.close()

    monkeypatch.chdir(served.root)
    shown = CliRunner().invoke(
        app, ["calls", "show", "c1", "--context", ctx["context_id"], "--json"]
    )
    assert shown.exit_code != 0, shown.output
    assert "RUN_LEDGER_INVALID" in shown.output, shown.output
    assert "SNAPSHOT_DIVERGENCE" in shown.output, shown.output
    resolved = CliRunner().invoke(
        app,
        [
            "calls", "resolve", "c1", "--context", ctx["context_id"], "--outcome", "failed",
            "--reason", "x", "--as", "alice", "--json",
        ],
    )  # fmt: skip
    assert resolved.exit_code != 0, resolved.output
    assert "RUN_LEDGER_INVALID" in resolved.output, resolved.output
    json.dumps(resolved.output)


KEY_EDITS = {
    "call_id": "UPDATE calls SET call_id = 'zz' WHERE run_id = ? AND call_id = 'c1'",
    "call_context": "UPDATE calls SET context_id = 'ctx-elsewhere' WHERE run_id = ?",
    "context_id": "UPDATE contexts SET context_id = 'ctx-elsewhere' WHERE run_id = ?",
}


@pytest.mark.anyio
@pytest.mark.parametrize("column", sorted(KEY_EDITS))
async def test_a_row_key_edited_in_place_fails_verification(
    tmp_path: Path, column: str, backend: Backend
) -> None:
    """Verification compares every key column of a run's rows with the rebuilt rows, not
    only their text and indexed columns: a call row whose call id was changed would otherwise
    let a new process dispatch the finished call ``c1`` again."""
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as writer:
        runs = await two_runs(writer)
    edit(KEY_EDITS[column], runs["damaged"])
    async with open_runtime(project, store=url) as rt:
        report = await rt.verify(runs["damaged"], rt.store.trust.key)
        assert (report.ok, report.reason) == (False, "SNAPSHOT_DIVERGENCE"), report
        assert column.split("_")[-1] in str(report.message)
        again = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        assert again.status is not CallStatus.SUCCEEDED, again
        assert runs_of(project, "kv.get") == 2  # the finished call was not dispatched again
        assert (await rt.verify(runs["intact"], rt.store.trust.key)).ok


@pytest.mark.anyio
@pytest.mark.parametrize("what", ["approval", "call", "proposal"])
async def test_an_approval_a_call_or_a_proposal_whose_row_is_gone(
    tmp_path: Path, what: str, backend: Backend
) -> None:
    """Looked up by their own ids (an approval decided, ``GET /v1/calls/{call_id}``, a
    proposal read): the run is refused instead of "no such approval/call/proposal" — and a
    call id two runs had is not answered from the one left."""
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as writer:
        runs = await two_runs(writer)
        pending = await writer.call(
            runs["damaged_ctx"], "kv.put", "w1", {"key": "k", "value": "v"}, as_="app"
        )
        assert pending.approval is not None, pending
        approval = pending.approval["id"]
        made = await ProposalService(writer).create(
            run_id=runs["damaged"], tenant="acme", requested_by="app", tool_id="kv.get",
            call_id="c1", draft={"kind": "note", "payload": {"a": 1}},
        )  # fmt: skip
    statement, key = {
        "approval": ("DELETE FROM approvals WHERE approval_id = ?", approval),
        "call": ("DELETE FROM calls WHERE call_id = 'c1' AND run_id = ?", runs["damaged"]),
        "proposal": ("DELETE FROM proposals WHERE proposal_id = ?", made["proposal_id"]),
    }[what]
    edit(statement, key)
    async with open_runtime(project, store=url) as rt:
        look = {
            "approval": lambda: rt.approve(approval, as_="alice"),
            "call": lambda: rt.get_call(None, "c1", as_="app"),
            "proposal": lambda: ProposalService(rt).get(made["proposal_id"], "acme"),
        }[what]
        with pytest.raises(Failure) as caught:
            await look()
        _refused({"reason": caught.value.reason, "message": str(caught.value)})
        assert runs_of(project, "kv.put") == 0
        if what == "call":  # another tenant is told nothing of it
            assert await rt.kernel.get_call(None, "c1", "globex") is None
