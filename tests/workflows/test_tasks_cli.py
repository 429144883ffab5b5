"""The report pipeline driven by shell commands only, through the real ``charter`` command in
a subprocess: ``runs create``, ``tasks ls|handoff|start|complete``, ``call --task``,
``runs finish``, ``runs verify`` — locally (``--as``) and against a real server on loopback
(``--server``, the API key decides who), with the same refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import ThreadServer
from tests.workflows.pipeline_env import pipeline_project

Shell = Callable[..., subprocess.CompletedProcess[str]]
ARGS = {
    "retrieve": ("data.fetch", lambda inputs: {"name": "sales"}),
    "analyse": ("stats.summarise", lambda inputs: {"dataset": inputs["dataset"]}),
    "report": ("report.write", lambda inputs: {"summary": inputs["summary"], "title": "Q"}),
}


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    return {**env, "NO_COLOR": "1", "COLUMNS": "200", **extra}


@pytest.fixture(params=["local", "server"])
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shell]:
    root = pipeline_project(tmp_path / "rp")
    secrets = root / ".charter" / "secrets"
    keys = {n: (secrets / f"{n}.key").read_text().strip() for n in ("alice", "app", "intruder")}

    def local(who: str | None, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "charter", *args, *(["--as", who] if who else [])],
            cwd=root,
            env=_env({}),
            capture_output=True,
            text=True,
            check=False,
        )

    if request.param == "local":
        yield local
        return

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as server:

        def remote(who: str | None, *args: str) -> subprocess.CompletedProcess[str]:
            if who is None:  # runs verify reads the project's ledger with its key
                return local(who, *args)
            return subprocess.run(
                [sys.executable, "-m", "charter", *args],
                cwd=root,
                env=_env({"CHARTER_SERVER": server.url, "CHARTER_API_KEY": keys[who]}),
                capture_output=True,
                text=True,
                check=False,
            )

        yield remote


def ok(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def refused(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.slow
def test_the_pipeline_from_the_shell(shell: Shell) -> None:
    run = ok(shell("alice", "runs", "create", "quarterly-report", "--json"))
    run_id = run["run_id"]
    assert run["tasks"] == {"retrieve": "pending", "analyse": "pending", "report": "pending"}
    listed = ok(shell("app", "tasks", "ls", run_id, "--json"))
    assert [t["contract"]["role"] for t in listed] == ["retriever", "analyst", "writer"]
    # who may drive: not the application on the operator's run; not another tenant at all
    out = refused(shell("app", "tasks", "handoff", run_id, "retrieve", "--json"), 1)
    assert "RUN_CONTROL_DENIED" in out
    out = refused(shell("intruder", "tasks", "ls", run_id, "--json"), 1)
    assert "RUN_NOT_FOUND" in out

    inputs: dict[str, str] = {}
    for task in ("retrieve", "analyse", "report"):
        handed = ok(shell("alice", "tasks", "handoff", run_id, task, "--json"))
        assert handed["handoff_id"].startswith("handoff-")
        assert ok(shell("alice", "tasks", "start", run_id, task, "--json"))["status"] == "running"
        tool, make = ARGS[task]
        args = json.dumps(make(inputs))
        call = ["call", tool, "--run", run_id, "--args", args, "--json"]
        if task == "retrieve":
            # no task named: refused (exit 4, denied) and nothing registered
            no_task = [*call[:4], "--profile", "retrieval", "--call-id", "c0", *call[4:]]
            assert "TASK_REQUIRED" in refused(shell("app", *no_task), 4)
            # outside the task's allowlist: the task's context does not offer the tool
            outside = ["call", "stats.summarise", "--run", run_id, "--task", task]
            outside += ["--call-id", "c1", "--args", '{"dataset": "artifact-000000000000"}']
            assert "TOOL_NOT_DISCLOSED" in refused(shell("app", *outside, "--json"), 4)
            # the wrong role: another role's agent in the task's profile offers nothing here
            wrong = [*call, "--task", task, "--agent", "writer", "--call-id", "c2"]
            out = refused(shell("app", *wrong), 4)
            assert "TOOL_NOT_DISCLOSED" in out or "AGENT_SCOPE" in out
        env = ok(shell("app", *call, "--task", task, "--call-id", f"{task}-1"))
        assert env["status"] == "succeeded", env
        done = ok(shell("alice", "tasks", "complete", run_id, task, "--json"))
        assert done["status"] == "completed"
        for a in ok(shell("alice", "artifacts", "ls", run_id, "--json")):
            inputs[a["type"]] = a["artifact_id"]
    end = ok(shell("alice", "runs", "finish", run_id, "--json"))
    assert end == {"run_id": run_id, "status": "completed", "gaps": []}
    verified = ok(shell(None, "runs", "verify", run_id, "--json"))
    assert verified["ok"] is True
    assert set(inputs) == {"dataset", "summary", "report"}


def test_operators_end_tasks_and_runs_from_the_shell(shell: Shell) -> None:
    """``tasks fail|skip|cancel`` and ``runs cancel`` (locally, and over HTTP with
    ``--server``): before, tasks could not be ended at all and runs only completed."""
    run_id = ok(shell("alice", "runs", "create", "quarterly-report", "--json"))["run_id"]
    ok(shell("alice", "tasks", "handoff", run_id, "retrieve", "--json"))
    ok(shell("alice", "tasks", "start", run_id, "retrieve", "--json"))
    # only a human operator ends tasks, and a running task cannot be skipped
    out = refused(shell("app", "tasks", "cancel", run_id, "retrieve", "--reason", "x", "--json"), 1)
    assert "ENDER_NOT_HUMAN" in out
    out = refused(shell("alice", "tasks", "skip", run_id, "retrieve", "--reason", "x", "--json"), 1)
    assert "ILLEGAL_TRANSITION" in out
    failed = ok(shell("alice", "tasks", "fail", run_id, "retrieve", "--reason", "bad", "--json"))
    assert failed["status"] == "failed"
    skipped = ok(shell("alice", "tasks", "skip", run_id, "report", "--reason", "no", "--json"))
    assert skipped["status"] == "skipped"
    cancelled = ok(shell("alice", "tasks", "cancel", run_id, "analyse", "--reason", "n", "--json"))
    assert cancelled["status"] == "cancelled"
    listed = ok(shell("alice", "tasks", "ls", run_id, "--json"))
    assert {t["task_id"]: t["status"] for t in listed} == {
        "retrieve": "failed",
        "analyse": "cancelled",
        "report": "skipped",
    }
    ended = ok(shell("alice", "runs", "cancel", run_id, "--reason", "wrong quarter", "--json"))
    assert ended["status"] == "cancelled"
    out = refused(shell("alice", "runs", "fail", run_id, "--reason", "again", "--json"), 1)
    assert "RUN_TERMINAL" in out
    assert ok(shell(None, "runs", "verify", run_id, "--json"))["ok"] is True


def test_a_missing_task_is_reported_alike_locally_and_over_http(shell: Shell) -> None:
    """``TASK_NOT_FOUND`` is the not-found answer of every resource (code permission_denied,
    a 404 over HTTP), the same from the local runtime and from a server."""
    run_id = ok(shell("alice", "runs", "create", "quarterly-report", "--json"))["run_id"]
    for argv in (
        ["tasks", "handoff", run_id, "nope"],
        ["tasks", "start", run_id, "nope"],
        ["tasks", "complete", run_id, "nope"],
        ["tasks", "cancel", run_id, "nope", "--reason", "x"],
    ):
        body = json.loads(refused(shell("alice", *argv, "--json"), 1))
        assert (body["code"], body["reason"]) == ("permission_denied", "TASK_NOT_FOUND"), argv
        assert "nope" in body["error"]
