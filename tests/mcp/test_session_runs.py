"""An MCP session outlives its run: after an operator cancels the session's run (or it is
closed when idle, or spent its budgets), the next tool call goes on in a fresh run of the
same session instead of being denied for good. A real ``charter mcp`` over stdio."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from charter.runtime import ledger_key_for, open_runtime
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


def _server(project: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=_flow.CHARTER,
        args=["mcp", "--profile", "all", "--as", "app", "--project", str(project)],
        cwd=project,
        env={k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))},
    )


async def test_a_session_past_its_runs_time_budget_keeps_working(tmp_path: Path) -> None:
    """Before: a stdio session reused one run, so once the run was ``run_elapsed_s`` old
    (an hour by default; 1.5 s here) every call was denied RUN_TIME_BUDGET_EXCEEDED."""
    project = write_runtime_project(tmp_path / "kv")
    deploy = project / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + "limits:\n  run_elapsed_s: 1.5\n")
    async with Client(_server(project), cache=None) as client:
        first = await client.call_tool("kv_get", {"key": "a"})
        assert not first.is_error, _flow.text(first)
        run_id = (first.meta or {})["charter/run_id"]
        await anyio.sleep(2.0)
        later = await client.call_tool("kv_get", {"key": "a"})
        assert not later.is_error, _flow.text(later)
        assert (later.meta or {})["charter/status"] == "succeeded"
        renewed = (later.meta or {})["charter/run_id"]
        assert renewed != run_id
    async with open_runtime(project) as rt:
        old = await rt.store.snapshot(run_id)
        new = await rt.store.snapshot(renewed)
        assert old is not None
        assert old.run is not None
        assert new is not None
        assert new.run is not None
        assert old.run["status"] == "completed"
        assert new.run["session_id"] == old.run["session_id"]
        ended = [json.loads(e.data) for e in await rt.store.read_stored(run_id)][-1]
        assert (ended["type"], ended["payload"]["reason"]) == (
            "run_status_changed",
            "BUDGET_RENEWED",
        )


async def test_a_client_that_goes_away_mid_call_leaves_nothing_dispatching(
    tmp_path: Path,
) -> None:
    """Before: a call cancelled in flight (here: the MCP client went away, so the server's
    session ended under it) stayed ``dispatching`` for good in a live process."""
    project = write_runtime_project(tmp_path / "kv")
    journal = project / "journal.txt"

    async def call(client: Client) -> None:
        await client.call_tool("kv_slow", {"seconds": 4})

    async with Client(_server(project), cache=None) as client, anyio.create_task_group() as tg:
        tg.start_soon(call, client)
        with anyio.fail_after(60):
            while not (journal.exists() and '"kv.slow"' in journal.read_text()):
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()  # the client gives up on the call ...
    # ... and goes away (stdin closed, the server process ended)
    async with open_runtime(project) as rt:
        [row] = [c for c in await rt.calls(tenant="acme", limit=100) if c.tool_id == "kv.slow"]
        assert row.state == "unknown", row
        assert row.receipt["error"]["reason"] == "CALL_CANCELLED"  # recorded by the server
        assert (await rt.verify(row.run_id, ledger_key_for(project))).ok


async def test_a_call_the_client_cancels_runs_once_and_its_outcome_stays_readable(
    tmp_path: Path,
) -> None:
    """The SDK client cancels a keyed call mid-flight (notifications/cancelled) and keeps its
    session: the call is recorded ``unknown`` / ``CALL_CANCELLED`` (never left dispatching),
    the same key answers that outcome without running the tool again, and the session goes
    on serving."""
    project = write_runtime_project(tmp_path / "kv")
    journal = project / "journal.txt"
    args = {"seconds": 2, "idempotency_key": "slow-1"}
    async with Client(_server(project), cache=None) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "kv_slow", args)
            with anyio.fail_after(60):
                while not (journal.exists() and '"kv.slow"' in journal.read_text()):
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        again = await client.call_tool("kv_slow", args)
        assert again.is_error
        assert (again.meta or {})["charter/status"] == "unknown", _flow.text(again)
        assert "CALL_CANCELLED" in _flow.text(again)
        other = await client.call_tool("kv_get", {"key": "a"})
        assert not other.is_error, _flow.text(other)
    assert journal.read_text().count('"kv.slow"') == 1
    async with open_runtime(project) as rt:
        [row] = [c for c in await rt.calls(tenant="acme", limit=100) if c.tool_id == "kv.slow"]
        assert (row.call_id, row.state) == ("slow-1", "unknown")
        assert (await rt.verify(row.run_id, ledger_key_for(project))).ok


async def test_a_write_cancelled_while_it_waits_for_the_runs_write_lock_is_cancelled(
    tmp_path: Path,
) -> None:
    """Two approved writes of one session (one run): the first holds the run's write lock
    while its tool runs, the second waits for it and the client cancels it there. Before: the
    second was recorded ``unknown`` / ``CALL_CANCELLED`` ("its effect may or may not have
    happened", an operator's to resolve) though its tool was never asked to run. Now it is
    ``cancelled``: nothing ran, as the kernel's table says for a call whose executor was
    never asked — and its key answers so without running it."""
    project = write_runtime_project(tmp_path / "kv")
    journal = project / "journal.txt"
    first = {"key": "a", "value": "1", "seconds": 2, "idempotency_key": "put-a"}
    second = {"key": "b", "value": "2", "seconds": 0, "idempotency_key": "put-b"}
    async with Client(_server(project), cache=None) as client:
        for args in (first, second):
            pending = await client.call_tool("kv_slow_put", args)
            approval = (pending.structured_content or {})["approval"]
            await _flow.charter_cli(
                project, "approvals", "approve", approval["id"], "--as", "alice"
            )
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "kv_slow_put", first)
            with anyio.fail_after(60):
                while not (journal.exists() and '"kv.slow_put"' in journal.read_text()):
                    await anyio.sleep(0.02)  # the first write runs, holding the lock
            async with anyio.create_task_group() as waiting:
                waiting.start_soon(client.call_tool, "kv_slow_put", second)
                await anyio.sleep(0.5)  # the second waits for the run's write lock
                waiting.cancel_scope.cancel()  # notifications/cancelled
        again = await client.call_tool("kv_slow_put", second)
        assert again.is_error
        assert (again.meta or {})["charter/status"] == "cancelled", _flow.text(again)
    assert [json.loads(line)["key"] for line in journal.read_text().splitlines()] == ["a"]
    async with open_runtime(project) as rt:
        rows = {c.call_id: c for c in await rt.calls(tenant="acme", limit=100)}
        assert rows["put-a"].state == "succeeded", rows["put-a"]
        assert rows["put-b"].state == "cancelled", rows["put-b"]
        assert (await rt.verify(rows["put-b"].run_id, ledger_key_for(project))).ok
