"""``charter init --example tutoring-panel`` and ``charter demo tutoring-panel`` end to end:
a real executor process, the approval flow, a verified ledger, the executor stopped."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from charter.cli.app import app


@pytest.mark.slow
def test_the_tutoring_panel_demo_runs_end_to_end(tmp_path: Path) -> None:
    target = tmp_path / "panel"
    init = CliRunner().invoke(app, ["init", str(target), "--example", "tutoring-panel"])
    assert init.exit_code == 0, init.output
    for name in ("executor.credential", "executor.signing.key", "panel.key", "rivera.key"):
        assert (target / ".charter" / "secrets" / name).stat().st_mode & 0o077 == 0
    result = CliRunner().invoke(
        app, ["demo", "tutoring-panel", str(target)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "pending_approval" in out
    assert "APPROVER_NOT_HUMAN" in out
    assert "verified" in out
    assert "stopped" in out
    # The executor's own database has Ben enrolled in Algebra I exactly once, and its
    # idempotency journal recorded that one write.
    with sqlite3.connect(target / "data" / "tutoring.db") as db:
        rows = db.execute(
            "SELECT count(*) FROM enrollments WHERE learner_id = 'l-ben' AND course_id = 'alg-1'"
        ).fetchone()
    assert rows == (1,)
    with sqlite3.connect(target / "data" / "executor-journal.db") as db:
        writes = db.execute(
            "SELECT count(*) FROM executions WHERE tool_id = 'enrollments.create'"
        ).fetchone()
    assert writes == (1,)
