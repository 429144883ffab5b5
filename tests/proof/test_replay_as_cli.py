"""charter runs replay through the real command: as the deployment, or loudly assuming."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio

from charter.cli.pipeline_demo import run_report_pipeline
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

SRC = str(Path(__file__).resolve().parents[2] / "src")


def charter(*args: str, cwd: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1", "COLUMNS": "200", **env_extra}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_replay_as_the_deployment_then_assuming_everything(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")

    async def record() -> str:
        async with pipeline_runtime(root) as rt:
            return (await run_report_pipeline(rt)).run_id

    run_id = anyio.run(record)
    done = charter("runs", "replay", run_id, "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["deployment"].endswith("charter.deploy.yaml")
    assert out["assumptions"] == []
    assert out["depends_on_assumption"] == []
    assert out["changed"] == []
    assert len(out["calls"]) >= 3
    # Without the deployment file (its ledger key where the local default looks), replay
    # assumes every principal holds every permission and every tool is enabled, and says so.
    (root / "charter.deploy.yaml").rename(root / "elsewhere.yaml")
    local_key = root / ".charter" / "ledger.key"
    local_key.unlink(missing_ok=True)
    shutil.copy(root / ".charter" / "secrets" / "ledger.key", local_key)
    key: dict[str, str] = {}
    done = charter("runs", "replay", run_id, "--json", cwd=root, **key)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["deployment"] is None
    assert out["assumptions"] == ["permissions", "enablement"]
    assert out["assumed_principals"]
    calls = {c["call_id"]: c["assumed"] for c in out["calls"]}
    assert out["depends_on_assumption"] == [c for c, a in calls.items() if a]
    assert "permissions" in calls[out["depends_on_assumption"][0]]
    table = charter("runs", "replay", run_id, cwd=root, **key)
    assert table.returncode == 0, table.stderr
    assert "ASSUMED" in table.stderr
    assert "every tool enabled" in table.stderr
    assert "decision(s) depend on that" in table.stderr
    # Given explicitly again: as the deployment, nothing assumed.
    again = charter("runs", "replay", run_id, "--deploy", "elsewhere.yaml", cwd=root)
    assert again.returncode == 0, again.stderr
    assert "ASSUMED" not in again.stderr
    assert "replayed as the deployment in elsewhere.yaml" in again.stdout
