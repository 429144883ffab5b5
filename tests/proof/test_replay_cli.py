"""charter runs replay: one read verifies the ledger and replays it; a damaged ledger fails."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
from typer.testing import CliRunner

from charter.cli.app import app
from charter.cli.pipeline_demo import run_report_pipeline
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime


def _record(root: Path) -> str:
    async def main() -> str:
        async with pipeline_runtime(root) as rt:
            return (await run_report_pipeline(rt)).run_id

    return anyio.run(main)


def test_replay_verifies_then_replays(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    run_id = _record(root)
    db = root / ".charter" / "charter.db"
    args = ["runs", "replay", run_id, "--project", str(root), "--store", f"sqlite:///{db}"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["verify"]["ok"] is True
    assert out["verify"]["events"] == out["events"]
    assert out["changed"] == []
    assert out["evaluation"]["ok"] is True
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0, text.output
    assert "ledger verified" in text.stdout

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM events WHERE run_id = ? AND seq = 3", (run_id,))
    conn.close()
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert (out["ok"], out["reason"], out["seq"]) == (False, "LEDGER_GAP", 3)
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 1
    assert "LEDGER_GAP" in text.stderr
