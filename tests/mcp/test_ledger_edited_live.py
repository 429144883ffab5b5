"""Events edited in the database under a live ``charter mcp`` (a real stdio subprocess, the
official SDK client): the server notices the edit and refuses the run's next call when the
run no longer verifies, instead of appending to it until a restart. An edit that leaves the
run intact lets the session go on. The store's side is tests/ledger/test_events_edited_live.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.kernel._project import write_runtime_project
from tests.mcp import _flow

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _server(project: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=_flow.CHARTER,
        args=["mcp", "--profile", "all", "--as", "app", "--project", str(project)],
        cwd=project,
        env={k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")},
    )


def _edit(project: Path, statement: str, run_id: str) -> None:
    """The attacker's own connection to the live server's store file."""
    conn = sqlite3.connect(project / ".charter" / "charter.db", isolation_level=None)
    try:
        assert conn.execute(statement, (run_id,)).rowcount == 1
    finally:
        conn.close()


async def _call(client: Client, key: str) -> tuple[bool, dict[str, object], str]:
    result = await client.call_tool("kv_get", {"key": key})
    return result.is_error, dict(result.meta or {}), _flow.text(result)


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("DELETE FROM events WHERE run_id = ? AND seq = 3", "LEDGER_GAP"),
        ("UPDATE events SET type = 'context_resolved' WHERE run_id = ? AND seq = 3", "LEDGER_HASH"),
    ],
)
async def test_the_next_call_is_refused_when_the_run_no_longer_verifies(
    tmp_path: Path, statement: str, problem: str
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with Client(_server(project), cache=None) as client:
        failed, meta, body = await _call(client, "a")
        assert not failed, body
        run_id = str(meta["charter/run_id"])
        _edit(project, statement, run_id)

        failed, meta, body = await _call(client, "b")
        assert failed, body
        assert meta["charter/status"] == "failed"
        assert meta["charter/run_id"] == run_id  # the same run, refused: not a fresh one
        assert "RUN_LEDGER_INVALID" in body
        assert f"({problem}" in body  # the problem found, and where
        assert "Traceback" not in body

    verify = [_flow.CHARTER, "runs", "verify", run_id, "--json"]
    done = await anyio.run_process(verify, cwd=project, check=False)
    assert done.returncode == 1, done.stderr.decode()
    report = json.loads(done.stdout)  # what was refused is what verify reports
    assert report["ok"] is False
    assert report["reason"].startswith(problem)


async def test_an_edit_that_changes_nothing_lets_the_session_go_on(tmp_path: Path) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with Client(_server(project), cache=None) as client:
        failed, meta, body = await _call(client, "a")
        assert not failed, body
        run_id = str(meta["charter/run_id"])
        _edit(project, "UPDATE events SET type = type WHERE run_id = ? AND seq = 3", run_id)

        failed, meta, body = await _call(client, "b")
        assert not failed, body
        assert meta["charter/run_id"] == run_id
        assert meta["charter/status"] == "succeeded"
