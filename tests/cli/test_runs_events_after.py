"""``charter runs events RUN --after N`` past the run's last event prints nothing and exits 0,
as the HTTP API's JSON answer is empty there; it is not a ledger-integrity error (the run has
no gap), through the real ``charter`` command."""

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
    return copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote


def test_after_past_the_last_event_is_empty_not_a_gap(demo: Path) -> None:
    made = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                   "--call-id", "s1", "--args", '{"query": "x"}', "--json", cwd=demo)  # fmt: skip
    assert made.returncode == 0, made.stderr
    run_id = json.loads(made.stdout)["run_id"]
    lines = charter("runs", "events", run_id, "--json", cwd=demo).stdout.splitlines()
    head = json.loads(lines[-1])["seq"]
    assert head == len(lines)

    for after in (head + 1, 100_000):
        done = charter("runs", "events", run_id, "--after", str(after), cwd=demo)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        as_json = charter("runs", "events", run_id, "--after", str(after), "--json", cwd=demo)
        assert (as_json.returncode, as_json.stdout) == (0, ""), as_json.stderr
    last = charter("runs", "events", run_id, "--after", str(head - 1), "--json", cwd=demo)
    assert [json.loads(x)["seq"] for x in last.stdout.splitlines()] == [head]
    assert charter("runs", "verify", run_id, cwd=demo).returncode == 0


def test_follow_of_an_ended_run_stops_once_everything_is_printed(demo: Path) -> None:
    """``--follow`` from the head of a run that has ended (or past it) ends at once: no event
    will come, and the command waited forever."""
    made = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                   "--call-id", "f1", "--args", '{"query": "x"}', "--json", cwd=demo)  # fmt: skip
    run_id = json.loads(made.stdout)["run_id"]
    ended = charter("runs", "cancel", run_id, "--reason", "done", "--as", "alice", cwd=demo)
    assert ended.returncode == 0, ended.stderr
    lines = charter("runs", "events", run_id, "--json", cwd=demo).stdout.splitlines()
    head = json.loads(lines[-1])["seq"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    for after, printed in ((0, head), (head, 0), (head + 5, 0)):
        done = subprocess.run(
            [CHARTER, "runs", "events", run_id, "--follow", "--json", "--after", str(after)],
            cwd=demo, capture_output=True, text=True, timeout=30, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == printed
