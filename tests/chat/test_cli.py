"""``charter chat`` and ``charter proposals``, locally and with ``--server``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.project.init import init_project
from tests.chat.conftest import Live

runner = CliRunner()


def _lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_local_chat_and_proposals(tmp_path: Path) -> None:
    init_project(tmp_path, template="workflow-copilot")
    base = ["--project", str(tmp_path)]
    out = runner.invoke(
        app,
        ["chat", "--agent", "copilot", "--as", "app", "-m", "create a workflow", *base],
    )
    assert out.exit_code == 0, out.output
    assert "⚙ activities_catalog" in out.output
    assert "✎ proposal" in out.output
    assert "I proposed it" in out.output
    listed = runner.invoke(app, ["proposals", "ls", "--as", "alice", "--json", *base])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.output)
    pid = row["proposal_id"]
    shown = runner.invoke(app, ["proposals", "show", pid, "--as", "alice", *base])
    assert "validated" in shown.output
    assert "a1" in shown.output
    early = runner.invoke(app, ["proposals", "apply", pid, "--as", "alice", *base])
    assert early.exit_code != 0
    for verb in ("approve", "apply"):
        done = runner.invoke(app, ["proposals", verb, pid, "--as", "alice", "--json", *base])
        assert done.exit_code == 0, done.output
    assert json.loads(done.output)["status"] == "applied"


def test_chat_and_proposals_through_a_server(
    copilot: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARTER_API_KEY", copilot.keys["app"])
    out = runner.invoke(
        app,
        [
            "chat",
            "--agent",
            "copilot",
            "-m",
            "create a workflow",
            "--server",
            copilot.url,
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    events = _lines(out.output)
    assert events[-1]["type"] == "conversation.completed"
    created = [e["data"] for e in events if e["type"] == "proposal.created"]
    pid = created[0]["proposalId"]  # type: ignore[index]
    monkeypatch.setenv("CHARTER_API_KEY", copilot.keys["alice"])
    rejected = runner.invoke(app, ["proposals", "reject", pid, "--server", copilot.url, "--json"])
    assert rejected.exit_code == 0, rejected.output
    assert json.loads(rejected.output)["status"] == "rejected"
    listed = runner.invoke(
        app, ["proposals", "ls", "--status", "rejected", "--server", copilot.url, "--json"]
    )
    assert pid in {r["proposal_id"] for r in json.loads(listed.output)}
