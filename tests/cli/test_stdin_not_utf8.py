"""The other readers of standard input (``charter call --args -``, ``charter tasks handoff
--file -``), through the real executable: bytes that are not UTF-8 are refused saying so and
where, exit 1, no traceback, nothing recorded (``charter chat``: tests/chat)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            [
                "call",
                "notes.search",
                "--call-id",
                "c1",
                "--args",
                "-",
                "--profile",
                "reader",
                "--as",
                "app",
            ],
            "--args -: standard input is not UTF-8 text (byte 0xff at offset 11)",
        ),
        (
            ["tasks", "handoff", "run-x", "t1", "--file", "-", "--as", "app"],
            "--file -: standard input is not UTF-8 text (byte 0xff at offset 11)",
        ),
    ],
)
def test_stdin_that_is_not_utf8_is_refused_saying_where(
    demo: Path, argv: list[str], says: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    done = subprocess.run(
        [CHARTER, *argv, "--json"],
        cwd=demo,
        input=b'{"query": "\xff"}',
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert b"Traceback" not in done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert (body["error"], body["reason"]) == (says, "BODY_MALFORMED")
    listed = charter("runs", "ls", "--json", cwd=demo)
    assert json.loads(listed.stdout) == []  # nothing recorded
