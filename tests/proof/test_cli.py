"""charter test / promote exit codes and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from charter.cli.app import app
from tests.proof.test_promotion import APPROVAL_TEST, EXPORT_WEAKENED, project


def test_charter_test_and_promote(tmp_path: Path) -> None:
    root = tmp_path / "p"
    project(root, tests={"a.yaml": APPROVAL_TEST})
    runner = CliRunner()
    res = runner.invoke(app, ["test", "--project", str(root), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["passed"] is True
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    b1 = root / "b1.json"
    b1.write_text(project(root, tests={"a.yaml": APPROVAL_TEST}).to_json())
    res = runner.invoke(
        app,
        ["promote", str(b1), "--env", "prod", "--project", str(root), "--store", store, "--json"],
    )
    assert res.exit_code == 0, res.output
    b2 = root / "b2.json"
    b2.write_text(project(root, export=EXPORT_WEAKENED).to_json())
    res = runner.invoke(
        app,
        ["promote", str(b2), "--env", "prod", "--project", str(root), "--store", store, "--json"],
    )
    assert res.exit_code == 1
    out = json.loads(res.output)
    assert out["promoted"] is False
    assert [r["name"] for r in out["report"]["results"] if not r["passed"]] == [
        "export-needs-approval"
    ]
