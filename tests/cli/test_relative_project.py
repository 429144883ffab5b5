"""``--project`` given relative to the working directory, with a tool served by the
``subprocess`` executor: the worker started in the project directory and was told the same
relative path again, so it looked for ``demo/demo/tools/notes.py`` and the tool was never
ready (``ENTRYPOINT_INVALID``, ``FileNotFoundError``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_first_hour import charter
from tests.conftest import copy_demo


def test_a_subprocess_tool_runs_with_a_relative_project(
    demo_template: Path, tmp_path: Path
) -> None:
    demo = copy_demo(demo_template, tmp_path)
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "notes.search: {executor: python}", "notes.search: {executor: subprocess}"
        )
    )
    done = charter("call", "notes.search", "--project", "demo", "--profile", "reader",
                   "--as", "app", "--call-id", "s1", "--args", "{}", "--json",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"


def test_promote_replay_and_evaluate_use_the_projects_store(
    demo_template: Path, tmp_path: Path
) -> None:
    """They opened the default store URL relative to the working directory, not the project:
    ``promote -p demo`` from the parent recorded the promotion in a new ``./.charter`` store
    there, and ``runs replay``/``runs evaluate -p demo`` found no store."""
    copy_demo(demo_template, tmp_path)
    p = ("--project", "demo")
    assert charter("build", *p, cwd=tmp_path).returncode == 0
    made = charter("call", "notes.search", *p, "--profile", "reader", "--as", "app",
                   "--call-id", "s1", "--args", "{}", "--json", cwd=tmp_path)  # fmt: skip
    run_id = json.loads(made.stdout)["run_id"]
    promoted = charter("promote", "latest", "--env", "prod", *p, cwd=tmp_path)
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    assert not (tmp_path / ".charter").exists()
    listed = charter("runs", "ls", *p, "--json", cwd=tmp_path)
    assert "promotion.prod.00000001" in {r["run_id"] for r in json.loads(listed.stdout)}
    replayed = charter("runs", "replay", run_id, *p, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    evaluated = charter("runs", "evaluate", run_id, *p, "--json", cwd=tmp_path)
    assert json.loads(evaluated.stdout)["run_id"] == run_id, evaluated.stderr
