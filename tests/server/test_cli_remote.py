"""The CLI's --server mode: the same commands over the HTTP API, the API key decides who."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.server._harness import Project, ThreadServer


def charter(
    args: list[str], key: str, server: ThreadServer, cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHARTER_API_KEY": key, "CHARTER_SERVER": server.url, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )


def test_call_approve_and_resubmit_over_the_api(
    project: Project, server: ThreadServer, tmp_path: Path
) -> None:
    app, alice = project.keys["app"], project.keys["alice"]
    ctx = json.loads(
        charter(["contexts", "resolve", "--profile", "all", "--json"], app, server, tmp_path).stdout
    )
    args = [
        "call",
        "kv.put",
        "--context",
        ctx["context_id"],
        "--call-id",
        "r1",
        "--args",
        '{"key": "k", "value": "v"}',
        "--json",
    ]
    pending = charter(args, app, server, tmp_path)
    assert pending.returncode == 3, pending.stderr
    approval = json.loads(pending.stdout)["approval"]["id"]
    refused = charter(["approvals", "approve", approval], app, server, tmp_path)
    assert refused.returncode == 1
    assert "APPROVER_NOT_HUMAN" in refused.stderr
    listed = json.loads(
        charter(
            ["approvals", "ls", "--status", "pending", "--json"], alice, server, tmp_path
        ).stdout
    )
    assert approval in {a["approval_id"] for a in listed}
    assert (
        charter(
            ["approvals", "approve", approval, "--reason", "ok"], alice, server, tmp_path
        ).returncode
        == 0
    )
    done = charter(args, app, server, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    shown = json.loads(
        charter(
            ["calls", "show", "r1", "--context", ctx["context_id"], "--json"], app, server, tmp_path
        ).stdout
    )
    assert shown["state"] == "succeeded"


def test_missing_api_key_is_a_clear_error(server: ThreadServer, tmp_path: Path) -> None:
    out = charter(["approvals", "ls"], "", server, tmp_path)
    assert out.returncode == 1
    assert "CHARTER_API_KEY" in out.stderr
