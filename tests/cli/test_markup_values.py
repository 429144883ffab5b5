"""Stored values that look like rich markup are printed as they are, through the real
``charter`` executable in text mode.

An argument value, an operator's reason, an artifact's name: each is written by a caller or
an operator and later shown by the listing and showing commands. Rich reads ``[...]`` as
markup, so ``[/]`` used to end a command with a MarkupError and ``[red]hidden`` was silently
swallowed as a style (``odd[red]x[/]y.txt`` listed as ``oddxy.txt``). Every command here must
exit 0 and show the text literally.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.cli.test_first_hour import charter
from tests.conftest import copy_demo

CLOSE = "[/]"
STYLED = "[red]hidden"
REASON = f"{CLOSE} {STYLED} [bold]loud[/bold]"
NAME = "odd[red]x[/]y.txt"


def ran(done: subprocess.CompletedProcess[str], code: int = 0) -> str:
    out = done.stdout + done.stderr
    assert done.returncode == code, out
    assert "Traceback" not in out, out
    assert "MarkupError" not in out, out
    return done.stdout


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ran(done))


def test_approval_arguments_and_operator_reasons_are_printed_literally(
    demo_template: Path, tmp_path: Path
) -> None:
    demo = copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote

    def cli(*args: str, code: int = 0) -> str:
        return ran(charter(*args, cwd=demo, columns=200), code)

    note = json.dumps({"title": CLOSE, "body": STYLED})
    pending = cli("call", "notes.add", "--profile", "editor", "--as", "app", "--call-id", "a1",
                  "--args", note, code=3)  # fmt: skip
    assert note in pending  # the command that completes the call, arguments as given

    [approval] = as_json(charter("approvals", "ls", "--as", "alice", "--json", cwd=demo))
    approval_id, call_id = approval["approval_id"], approval["call_id"]
    listed = cli("approvals", "ls", "--as", "alice")
    assert f'"body": "{STYLED}"' in listed
    assert f'"title": "{CLOSE}"' in listed
    shown = cli("approvals", "show", approval_id, "--as", "alice", "--full")
    assert f'"body": "{STYLED}"' in shown
    assert f'"title": "{CLOSE}"' in shown
    assert shown.count(STYLED) == 2  # the preview and the full arguments

    # an artifact named with markup, uploaded by the application into the same run
    run_id = _only_run(demo)
    events = [json.loads(line) for line in cli("runs", "events", run_id, "--json").splitlines()]
    context_id = next(e["payload"]["context_id"] for e in events if "context_id" in e["payload"])
    (demo / "up.txt").write_text("x")
    cli("artifacts", "put", run_id, "up.txt", "--name", NAME, "--as", "app")
    assert NAME in cli("artifacts", "ls", run_id, "--as", "app")

    assert "is now rejected" in cli(
        "approvals", "reject", approval_id, "--as", "alice", "--reason", REASON
    )
    assert STYLED in cli("approvals", "ls", "--as", "alice", "--status", "rejected")
    called = cli("calls", "show", call_id, "--context", context_id, "--as", "alice")
    assert f"call {call_id}  denied  tool notes.add" in called
    assert "is now cancelled" in cli("runs", "cancel", run_id, "--as", "alice", "--reason", REASON)

    assert run_id in cli("runs", "ls")
    manifest = cli("runs", "show", run_id)
    assert f"{run_id}  adhoc  status cancelled" in manifest
    assert NAME in manifest
    ledger = cli("runs", "events", run_id)
    assert f"approval_rejected  call_id={call_id} reason={REASON}" in ledger
    assert f"status=cancelled reason={REASON}" in ledger
    assert "ok" in cli("runs", "verify", run_id)


def _only_run(demo: Path) -> str:
    """The run the call was made in: the project's only run."""
    rows = as_json(charter("runs", "ls", "--json", cwd=demo))
    assert len(rows) == 1, rows
    return str(rows[0]["run_id"])


def test_a_catalog_run_with_marked_up_names_and_reasons(tmp_path: Path) -> None:
    made = charter("init", "rp", "--example", "report-pipeline", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    rp = tmp_path / "rp"

    def cli(*args: str, code: int = 0) -> str:
        return ran(charter(*args, cwd=rp, columns=200), code)

    cli("build")
    run_id = as_json(charter("runs", "create", "quarterly-report", "--as", "alice", "--json",
                             cwd=rp))["run_id"]  # fmt: skip
    (rp / "up.txt").write_text("x")
    cli("artifacts", "put", run_id, "up.txt", "--name", NAME, "--as", "alice")
    cli("tasks", "cancel", run_id, "retrieve", "--as", "alice", "--reason", REASON)
    tasks = cli("tasks", "ls", run_id, "--as", "alice")
    assert f"tasks of {run_id}" in tasks
    assert "retrieve  cancelled" in tasks
    cli("runs", "cancel", run_id, "--as", "alice", "--reason", STYLED)
    manifest = cli("runs", "show", run_id)
    assert NAME in manifest
    assert "status cancelled" in manifest
    assert NAME in cli("artifacts", "ls", run_id, "--as", "alice")
    ledger = cli("runs", "events", run_id)
    assert f"task_id=retrieve reason={REASON}" in ledger
    assert f"status=cancelled reason={STYLED}" in ledger
