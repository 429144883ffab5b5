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
