"""A newcomer's first hour (issue 23), through the real ``charter`` executable.

Each test follows one step of the README's tour or one piece of bad input a new user meets,
and checks that the output says what the next step needs.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

CHARTER = str(Path(sys.executable).parent / "charter")


def charter(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [CHARTER, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )


def pasted(line: str, prefix: str) -> list[str]:
    """The command a line of output offers after ``prefix``, as argv for the real executable."""
    assert prefix in line, line
    argv = shlex.split(line.split(prefix, 1)[1])
    assert argv[0] == "charter"
    return argv[1:]


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    made = charter("init", "demo", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path / "demo"


def test_pending_call_prints_the_commands_that_complete_it(demo: Path) -> None:
    # Run from outside the project, so the printed commands must carry --project too.
    here = demo.parent
    args = '{"title": "t", "body": "b"}'
    out = charter(
        "call", "notes.add", "--project", "demo", "--profile", "editor", "--as", "app",
        "--call-id", "a1", "--args", args, cwd=here,
    )  # fmt: skip
    assert out.returncode == 3, out.stderr
    lines = out.stdout.splitlines()
    approve = pasted(next(x for x in lines if "approves with:" in x), "approves with:")
    retry = pasted(next(x for x in lines if "complete the call" in x), "complete the call with:")
    assert approve[:2] == ["approvals", "approve"]
    assert approve[-2:] == ["--as", "OPERATOR"]
    assert approve[approve.index("--project") + 1] == "demo"
    assert retry[retry.index("--context") + 1].startswith("ctx-")
    assert retry[retry.index("--args") + 1] == args
    assert retry[retry.index("--call-id") + 1] == "a1"

    approve[-1] = "alice"
    decided = charter(*approve, cwd=here)
    assert decided.returncode == 0, decided.stderr
    assert "approved" in decided.stdout

    done = charter(*retry, cwd=here)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("succeeded  call a1")
    # The approved approval was used: no second one was opened.
    listed = charter("approvals", "ls", "--project", "demo", "--as", "alice", "--json", cwd=here)
    rows = json.loads(listed.stdout)
    assert [r["status"] for r in rows] == ["consumed"]


def test_star_permission_grants_everything_as_documented(demo: Path) -> None:
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "principals:\n",
            'principals:\n  root:\n    kind: operator\n    tenant: acme\n    permissions: ["*"]\n',
        )
    )
    args = '{"title": "t", "body": "b"}'
    asked = charter(
        "call", "notes.add", "--profile", "editor", "--as", "root", "--call-id", "r1",
        "--args", args, "--json", cwd=demo,
    )  # fmt: skip
    assert asked.returncode == 3, asked.stdout + asked.stderr
    pending = json.loads(asked.stdout)
    # "*" holds approvals:approve too, so root (an operator) may approve.
    decided = charter("approvals", "approve", pending["approval"]["id"], "--as", "root", cwd=demo)
    assert decided.returncode == 0, decided.stderr
    done = charter(
        "call", "notes.add", "--context", pending["context_id"], "--call-id", "r1",
        "--args", args, cwd=demo,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_bad_permission_is_still_refused_by_name(demo: Path) -> None:
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text().replace("[notes:read]", '["**"]'))
    out = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                  "--call-id", "x", cwd=demo)  # fmt: skip
    assert out.returncode == 1
    assert "permissions[0]" in out.stderr
    assert "is not a valid permission" in out.stderr
