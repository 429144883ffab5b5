"""A catalog run whose task row was deleted from the database under a running server: every
task act answers ``RUN_LEDGER_INVALID`` naming the task, over a real loopback server — never
a 500 from a Python ``KeyError`` / ``AssertionError``, a listing that silently leaves the
task out, or an event appended to the damaged run."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import ThreadServer
from tests.workflows.pipeline_env import pipeline_project
from tests.workflows.test_tasks_http import _handoff

ACTS: dict[str, Callable[[httpx2.Client, str], httpx2.Response]] = {
    "list": lambda http, run: http.get(f"/v1/runs/{run}/tasks"),
    "show": lambda http, run: http.get(f"/v1/runs/{run}/tasks/retrieve"),
    "handoff": lambda http, run: http.post(
        f"/v1/runs/{run}/tasks/retrieve/handoff",
        json=_handoff({"contract": _CONTRACT}, {}),
    ),
    "start a dependant": lambda http, run: http.post(f"/v1/runs/{run}/tasks/analyse/start"),
    "complete": lambda http, run: http.post(f"/v1/runs/{run}/tasks/analyse/complete"),
    "finish": lambda http, run: http.post(f"/v1/runs/{run}/finish"),
}
_CONTRACT = {
    "title": "Retrieve the data set",
    "role": "retriever",
    "acceptance_criteria": ["a CSV data set with a header row"],
    "input_artifacts": [],
    "output_artifacts": ["dataset"],
    "required_tools": ["data.fetch"],
}


@pytest.fixture
def live(tmp_path: Path) -> Any:
    root = pipeline_project(tmp_path / "rp")
    db = root / ".charter" / "charter.db"
    key = (root / ".charter" / "secrets" / "alice.key").read_text().strip()

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{db}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as server:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
            yield http, db


def _sql(db: Path, query: str, *args: Any) -> list[Any]:
    conn = sqlite3.connect(db)
    try:
        with conn:
            return conn.execute(query, args).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("act", sorted(ACTS))
def test_a_deleted_task_row_refuses_the_run_naming_the_task(live: Any, act: str) -> None:
    http, db = live
    res = http.post("/v1/runs", json={"workflow": "quarterly-report"})
    assert res.status_code == 201, res.text
    run = res.json()["run_id"]
    assert [t["task_id"] for t in http.get(f"/v1/runs/{run}/tasks").json()] == [
        "retrieve",
        "analyse",
        "report",
    ]
    # Without the trigger that notes a deleted row (ledger_edits: then the whole run is
    # verified again, tests/ledger/test_events_edited_live.py), each act still finds it.
    _sql(db, "DROP TRIGGER tasks_row_deleted")
    _sql(db, "DELETE FROM tasks WHERE run_id = ? AND task_id = 'retrieve'", run)
    (before,) = _sql(db, "SELECT count(*) FROM events WHERE run_id = ?", run)

    res = ACTS[act](http, run)
    problem = res.json()
    assert (res.status_code, problem["reason"]) == (500, "RUN_LEDGER_INVALID"), res.text
    assert "SNAPSHOT_DIVERGENCE" in problem["detail"]
    assert "task 'retrieve'" in problem["detail"]
    assert "Error" not in problem["detail"]
    assert _sql(db, "SELECT count(*) FROM events WHERE run_id = ?", run) == [before]
    # the run stays refused for every other act
    res = http.get(f"/v1/runs/{run}/tasks/report")
    assert (res.status_code, res.json()["reason"]) == (500, "RUN_LEDGER_INVALID")
