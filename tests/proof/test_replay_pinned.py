"""``charter runs replay RUN`` replays each context against the Build it was pinned to — the
Build that governed its calls, kept under ``.charter/builds/`` by the runtime that compiled
it — even after the source changed and a newer Build became latest; ``--build`` replays
against a candidate to show what it would decide differently. Before, replay always took
the project's latest Build (so a changed source read as changed decisions), and a run whose
calls were made without ``charter build`` could not be replayed at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.project.build import BUILDS_DIR, LATEST_FILE
from tests.cli.test_first_hour import charter
from tests.conftest import copy_demo


@pytest.fixture
def recorded(demo_template: Path, tmp_path: Path) -> tuple[Path, str, str]:
    """A demo project with one read call made through the CLI (no ``charter build`` run):
    the project, the call's run and the digest its context was pinned to."""
    demo = copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote
    made = charter(
        "call", "notes.search", "--args", '{"query": "x"}', "--call-id", "c1",
        "--profile", "reader", "--as", "app", "--json", cwd=demo,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    envelope = json.loads(made.stdout)
    events = charter("runs", "events", envelope["run_id"], "--json", cwd=demo)
    [resolved] = [
        json.loads(line)
        for line in events.stdout.splitlines()
        if json.loads(line)["type"] == "context_resolved"
    ]
    return demo, envelope["run_id"], resolved["payload"]["build_digest"]


def test_replay_takes_the_pinned_build_after_the_source_changed(
    recorded: tuple[Path, str, str],
) -> None:
    demo, run_id, pinned = recorded
    builds = demo / BUILDS_DIR
    assert (builds / (pinned.replace(":", "-") + ".json")).is_file()  # kept by the runtime
    assert not (builds / LATEST_FILE).exists()  # ... without becoming the latest

    config = demo / "charter.yaml"
    text = config.read_text()
    assert "include: [notes.search, notes.get]" in text
    config.write_text(text.replace("include: [notes.search, notes.get]", "include: [notes.get]"))
    built = charter("build", cwd=demo)
    assert built.returncode == 0, built.stderr
    assert (builds / LATEST_FILE).read_text().strip() != pinned

    as_governed = charter("runs", "replay", run_id, "--json", cwd=demo)
    assert as_governed.returncode == 0, as_governed.stderr
    report = json.loads(as_governed.stdout)
    assert (report["pinned"], report["build_digest"]) == (True, pinned)
    assert report["changed"] == []
    assert [c["replayed"] for c in report["calls"]] == ["allowed"]
    table = charter("runs", "replay", run_id, cwd=demo)
    assert f"against its pinned Build {pinned[:19]}" in table.stdout

    candidate = charter("runs", "replay", run_id, "--build", "latest", "--json", cwd=demo)
    assert candidate.returncode == 0, candidate.stderr
    report = json.loads(candidate.stdout)
    assert report["pinned"] is False
    assert report["build_digest"] != pinned
    assert report["now_denied"] == ["c1"]  # the candidate no longer offers notes.search


def test_a_pinned_build_that_cannot_be_found_is_named(recorded: tuple[Path, str, str]) -> None:
    demo, run_id, pinned = recorded
    (demo / BUILDS_DIR / (pinned.replace(":", "-") + ".json")).unlink()
    same_source = charter("runs", "replay", run_id, "--json", cwd=demo)
    assert same_source.returncode == 0, same_source.stderr  # the source still compiles to it
    assert json.loads(same_source.stdout)["build_digest"] == pinned

    config = demo / "charter.yaml"
    config.write_text(config.read_text().replace("A tiny notebook", "A changed notebook"))
    done = charter("runs", "replay", run_id, "--json", cwd=demo)
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert pinned in body["error"]
    assert "--build" in body["error"]
