"""An MCP session outlives its run: after an operator cancels the session's run (or it is
closed when idle, or spent its budgets), the next tool call goes on in a fresh run of the
same session instead of being denied for good. A real ``charter mcp`` over stdio."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from charter.runtime import open_runtime
from tests.kernel._project import write_runtime_project
from tests.mcp import _flow

pytestmark = pytest.mark.anyio


async def test_the_session_continues_in_a_fresh_run_after_its_run_ended(tmp_path: Path) -> None:
    project = write_runtime_project(tmp_path / "kv")
    server = StdioServerParameters(
        command=_flow.CHARTER,
        args=["mcp", "--profile", "all", "--as", "app", "--project", str(project)],
        cwd=project,
        # the whole environment (PYTHONPATH included), so the server runs this checkout
        env={k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")},
    )
    async with Client(server, cache=None) as client:
        first = await client.call_tool("kv_get", {"key": "a"})
        assert not first.is_error, _flow.text(first)
        run_id = (first.meta or {})["charter/run_id"]
        async with open_runtime(project) as rt:
            ended = await rt.operations.end_run(
                run_id, "cancelled", reason="start over", as_="alice"
            )
            assert ended["status"] == "cancelled"
        again = await client.call_tool("kv_get", {"key": "a"})
        assert not again.is_error, _flow.text(again)
        assert (again.meta or {})["charter/status"] == "succeeded"
        fresh = (again.meta or {})["charter/run_id"]
        assert fresh != run_id
    async with open_runtime(project) as rt:
        old = await rt.store.snapshot(run_id)
        new = await rt.store.snapshot(fresh)
        assert old is not None
        assert old.run is not None
        assert new is not None
        assert new.run is not None
        assert old.run["status"] == "cancelled"
        assert new.run["session_id"] == old.run["session_id"]
