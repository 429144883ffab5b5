"""A SQLite file damaged on disk (a page overwritten, as a failing disk or a bad copy leaves
it) is named as such by the real ``charter`` executable: ``STORE_CORRUPT`` with the file's
path and what to do, on a read command, on a call and at ``charter serve`` start — one line,
exit 1, never a traceback, and not the bare ``STORE_ERROR`` "DatabaseError" it was."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import httpx2
import pytest

from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo
from tests.server._harness import spawn_serve


def _overwrite_table_root(db: Path, table: str) -> None:
    """Overwrite the root page of ``table`` with bytes that are no B-tree page."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    finally:
        conn.close()
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)


@pytest.fixture
def damaged(demo_template: Path, tmp_path: Path) -> Path:
    demo = copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote
    made = charter(
        "call", "notes.search", "--args", '{"query": "x"}', "--call-id", "c1",
        "--profile", "reader", "--as", "app", "--json", cwd=demo,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    db = demo / ".charter" / "charter.db"
    _overwrite_table_root(db, "runs")
    return demo


def test_a_damaged_database_file_is_named_on_every_command(damaged: Path) -> None:
    db = str(damaged / ".charter" / "charter.db")
    listed = charter("runs", "ls", "--json", cwd=damaged)
    assert listed.returncode == 1
    assert "Traceback" not in listed.stdout + listed.stderr
    body = json.loads(listed.stdout)
    assert (body["code"], body["reason"]) == ("internal", "STORE_CORRUPT"), body
    assert db in body["error"]
    assert "PRAGMA integrity_check" in body["error"]

    call = charter(
        "call", "notes.search", "--args", '{"query": "x"}', "--call-id", "c2",
        "--profile", "reader", "--as", "app", "--json", cwd=damaged,
    )  # fmt: skip
    assert call.returncode != 0
    assert "Traceback" not in call.stdout + call.stderr
    assert "STORE_CORRUPT" in call.stdout, call.stdout

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    served = subprocess.run(
        [CHARTER, "serve", "--port", "0"],
        cwd=damaged,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert served.returncode == 1
    assert "Traceback" not in served.stdout + served.stderr
    last = served.stderr.strip().splitlines()[-1]
    assert last.startswith("error: internal (STORE_CORRUPT)"), served.stderr
    assert db in last


def test_a_file_damaged_under_a_live_server_is_named_and_stops_its_writes(
    demo_template: Path, tmp_path: Path
) -> None:
    """The page cache of a running ``charter serve`` may hide the damage from reads; the
    first write that meets it stops the store (fail-stop) and says the file is damaged, and
    so do every later write and ``/readyz`` — not a bare ``STORE_FAILED`` "DatabaseError"."""
    demo = copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote
    db = demo / ".charter" / "charter.db"
    key = (demo / ".charter" / "secrets" / "app.key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    body = {"profile": "reader"}
    with spawn_serve(demo, "sqlite:///.charter/charter.db") as url:
        assert httpx2.post(f"{url}/v1/contexts", json=body, headers=auth).status_code == 201
        _overwrite_table_root(db, "contexts")
        for _ in range(2):  # the write that meets the damage, then one refused by fail-stop
            answer = httpx2.post(f"{url}/v1/contexts", json=body, headers=auth)
            assert answer.status_code == 500, answer.text
            problem = answer.json()
            assert problem["reason"] == "STORE_CORRUPT", problem
            assert str(db) in problem["detail"]
            assert "PRAGMA integrity_check" in problem["detail"]
        ready = httpx2.get(f"{url}/readyz")
        assert ready.status_code == 503
        (store,) = [c for c in ready.json()["checks"] if c["name"] == "store"]
        assert store["reason"] == "STORE_CORRUPT", store
    log = next(demo.glob("serve-*.log")).read_text()
    assert "Traceback" not in log
