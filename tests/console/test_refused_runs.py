"""A refused run shows where an operator looks (issue 16): ``/readyz`` details, the console's
attention page, ``charter runs ls``; ``charter runs quarantine`` marks a run refused by every
runtime (running ones too: tests/ledger/test_live_quarantine.py), and the HTTP API answers
``internal`` / ``RUN_LEDGER_INVALID``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.client import Client
from tests.console._console import signed_in
from tests.console.conftest import console_app
from tests.server._harness import ThreadServer, write_served_project


def _runs_ls(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, object]]:
    monkeypatch.chdir(root)
    result = CliRunner().invoke(app, ["runs", "ls", "--json"])
    assert result.exit_code == 0, result.output
    return {r["run_id"]: r for r in json.loads(result.stdout)}


def test_refused_and_quarantined_runs_are_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_served_project(tmp_path / "served")
    root = project.root
    with ThreadServer(console_app(root)) as live:
        client = Client(live.url, project.keys["app"])
        damaged = client.resolve_context("all")
        intact = client.resolve_context("all")
        client.close()
    db = sqlite3.connect(root / ".charter" / "charter.db", isolation_level=None)
    db.execute("DELETE FROM events WHERE run_id = ? AND seq = 2", (damaged["run_id"],))
    db.close()
    with ThreadServer(console_app(root)) as live:
        http = httpx2.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {project.keys['app']}"}
        )
        answer = http.post(
            f"/v1/contexts/{damaged['context_id']}/calls",
            json={"tool": "kv.get", "call_id": "c1", "arguments": {"key": "k"}},
        )
        body = answer.json()
        problem = body.get("error") or body
        assert problem["reason"] == "RUN_LEDGER_INVALID", body
        assert "LEDGER_GAP" in problem["message"]
        # the context is not served either, even from the process's cache
        got = http.get(f"/v1/contexts/{damaged['context_id']}")
        assert (got.status_code, got.json()["reason"]) == (500, "RUN_LEDGER_INVALID")
        # but an operator of its tenant can still verify it; another tenant cannot see it
        verified = httpx2.get(
            f"{live.url}/v1/runs/{damaged['run_id']}/verify",
            headers={"Authorization": f"Bearer {project.keys['alice']}"},
        )
        assert verified.status_code == 200, verified.text
        assert (verified.json()["ok"], verified.json()["reason"]) == (False, "LEDGER_GAP")
        elsewhere = httpx2.get(
            f"{live.url}/v1/runs/{damaged['run_id']}/verify",
            headers={"Authorization": f"Bearer {project.keys['bob']}"},
        )
        assert (elsewhere.status_code, elsewhere.json()["reason"]) == (404, "RUN_NOT_FOUND")
        ok = http.post(
            f"/v1/contexts/{intact['context_id']}/calls",
            json={"tool": "kv.get", "call_id": "c1", "arguments": {"key": "k"}},
        )
        assert ok.json()["status"] == "succeeded"
        ready = http.get("/readyz").json()
        [ledger] = [c for c in ready["checks"] if c["name"] == "ledger"]
        assert (ledger["refused_runs"], ledger["reasons"]) == (1, {"LEDGER_GAP": 1})
        assert damaged["run_id"] not in json.dumps(ready)  # public: counts, never ids
        http.close()
        page = signed_in(live.url, project.keys["alice"]).get("/console/attention").text
        assert f'data-run-id="{damaged["run_id"]}"' in page
        assert "LEDGER_GAP" in page
        assert f'data-run-id="{intact["run_id"]}"' not in page
    listed = _runs_ls(root, monkeypatch)
    assert listed[damaged["run_id"]]["ledger"]["reason"] == "LEDGER_GAP"  # type: ignore[index]
    assert listed[intact["run_id"]]["ledger"] is None
    marked = CliRunner().invoke(
        app,
        ["runs", "quarantine", intact["run_id"], "--reason", "audit", "--by", "alice", "--json"],
    )
    assert marked.exit_code == 0, marked.output
    assert _runs_ls(root, monkeypatch)[intact["run_id"]]["ledger"]["quarantined"] is True  # type: ignore[index]
    with ThreadServer(console_app(root)) as live:
        client = Client(live.url, project.keys["app"])
        env = client.call(intact["context_id"], "kv.get", "c2", {"key": "k"})
        client.close()
    assert env.error is not None
    assert env.error["reason"] == "RUN_LEDGER_INVALID"
    assert "quarantined" in env.error["message"]
