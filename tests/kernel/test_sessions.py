"""Session runs end when idle, and a long session's budgets renew.

Before: every CLI call and MCP session left an ad-hoc run ``running`` forever, and a chat or
MCP session that reused one run was denied ``RUN_TIME_BUDGET_EXCEEDED`` on every call once
the run was an hour old.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from charter.kernel.sessions import listing
from charter.ledger.projections import run_key
from charter.ledger.verify import verify_run
from charter.runtime import ledger_key_for, open_runtime
from tests.kernel._project import write_runtime_project
from tests.kernel.conftest import APP, KEY, Env

pytestmark = pytest.mark.anyio

IDLE = 3600.0


async def status_of(env: Env, run_id: str) -> str:
    row = await env.store.get_row(run_key(run_id))
    assert row is not None
    return str(row["status"])


async def last_status_event(env: Env, run_id: str) -> dict[str, Any]:
    events = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(run_id)
        if r.type == "run_status_changed"
    ]
    return events[-1]


async def test_an_idle_session_run_is_completed(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", "g1", {"key": "a"}, principal=APP)
    assert out.ok
    env.clock.advance(timedelta(seconds=IDLE - 1))
    assert await env.kernel.close_idle_runs() == []  # not idle yet
    env.clock.advance(timedelta(seconds=2))
    [closed] = await env.kernel.close_idle_runs()
    assert closed.run_id == ctx.run_id
    assert await status_of(env, ctx.run_id) == "completed"
    event = await last_status_event(env, ctx.run_id)
    assert (event["by"], event["reason"]) == ("session", "IDLE")
    assert await env.kernel.close_idle_runs() == []
    assert (await verify_run(env.store, ctx.run_id, KEY)).ok


async def test_an_idle_session_run_with_an_unknown_call_is_partial(env: Env) -> None:
    class Exploding:
        kind = "python"

        async def execute(self, request: Any) -> Any:
            raise RuntimeError("lost the worker")

        async def aclose(self) -> None:
            return None

    ctx = await env.kernel.resolve_context(APP, "all")
    python = env.kernel.executors["python"]
    env.kernel.executors["python"] = Exploding()  # type: ignore[assignment]
    out = await env.kernel.call(ctx.context_id, "kv.get", "g1", {"key": "a"}, principal=APP)
    env.kernel.executors["python"] = python
    assert out.status is CallStatus.UNKNOWN
    env.clock.advance(timedelta(seconds=IDLE + 1))
    await env.kernel.close_idle_runs()
    assert await status_of(env, ctx.run_id) == "partial"
    assert (await verify_run(env.store, ctx.run_id, KEY)).ok


async def test_a_run_waiting_for_approval_or_busy_is_not_idle_closed(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(
        ctx.context_id, "kv.put", "w1", {"key": "k", "value": "v"}, principal=APP
    )
    assert out.status is CallStatus.PENDING_APPROVAL
    env.clock.advance(timedelta(seconds=IDLE / 2))
    other = await env.kernel.resolve_context(APP, "all")
    env.clock.advance(timedelta(seconds=IDLE / 2 + 1))
    await env.kernel.call(other.context_id, "kv.get", "g1", {"key": "a"}, principal=APP)
    closed = {r.run_id for r in await env.kernel.close_idle_runs()}
    assert other.run_id not in closed  # it just made a call
    assert ctx.run_id not in closed  # it waits for an approval (input_required)
    assert await status_of(env, ctx.run_id) == "input_required"
    # once the approval is recorded expired the run is free, and then idle: closed
    await env.kernel.expire_approvals()
    assert await status_of(env, ctx.run_id) == "running"
    env.clock.advance(timedelta(seconds=IDLE + 1))
    closed = {r.run_id for r in await env.kernel.close_idle_runs()}
    assert ctx.run_id in closed


async def test_a_long_session_renews_its_run_and_keeps_working(env: Env) -> None:
    env.kernel.settings = replace(env.kernel.settings, run_elapsed_budget_s=600.0)
    first = await env.kernel.resolve_context(
        APP, "all", session_id="conv-1", workflow_slug="chat", session=True
    )
    assert (await env.kernel.call(first.context_id, "kv.get", "a", {"key": "a"}, principal=APP)).ok
    env.clock.advance(timedelta(seconds=601))
    spent = await env.kernel.call(first.context_id, "kv.get", "b", {"key": "a"}, principal=APP)
    assert spent.error is not None
    assert spent.error["reason"] == "RUN_TIME_BUDGET_EXCEEDED"
    # the session's next context opens a fresh run of the same session
    second = await env.kernel.resolve_context(
        APP, "all", run_id=first.run_id, session_id="conv-1", workflow_slug="chat", session=True
    )
    assert second.run_id != first.run_id
    ok = await env.kernel.call(second.context_id, "kv.get", "b", {"key": "a"}, principal=APP)
    assert ok.ok, ok
    assert await status_of(env, first.run_id) == "completed"
    assert (await last_status_event(env, first.run_id))["reason"] == "BUDGET_RENEWED"
    renewed = await env.store.get_row(run_key(second.run_id))
    assert renewed is not None
    assert renewed["session_id"] == "conv-1"
    # days later, still working: each renewal is a new run within the budgets
    for day in range(3):
        env.clock.advance(timedelta(days=1))
        ctx = await env.kernel.resolve_context(
            APP,
            "all",
            run_id=second.run_id,
            session_id="conv-1",
            workflow_slug="chat",
            session=True,
        )
        out = await env.kernel.call(
            ctx.context_id, "kv.get", f"d{day}", {"key": "a"}, principal=APP
        )
        assert out.ok, out
        second = ctx


async def test_without_renewal_the_budget_binds_the_session(env: Env) -> None:
    env.kernel.settings = replace(
        env.kernel.settings, run_elapsed_budget_s=600.0, renew_session_budgets=False
    )
    first = await env.kernel.resolve_context(
        APP, "all", session_id="conv-2", workflow_slug="chat", session=True
    )
    env.clock.advance(timedelta(seconds=601))
    again = await env.kernel.resolve_context(
        APP, "all", run_id=first.run_id, session_id="conv-2", workflow_slug="chat", session=True
    )
    assert again.run_id == first.run_id
    out = await env.kernel.call(again.context_id, "kv.get", "x", {"key": "a"}, principal=APP)
    assert out.error is not None
    assert out.error["reason"] == "RUN_TIME_BUDGET_EXCEEDED"


async def test_a_session_goes_on_after_its_run_was_idle_closed(env: Env) -> None:
    first = await env.kernel.resolve_context(
        APP, "all", session_id="mcp-s", workflow_slug="mcp-session", session=True
    )
    env.clock.advance(timedelta(seconds=IDLE + 1))
    await env.kernel.close_idle_runs()
    nxt = await env.kernel.resolve_context(
        APP,
        "all",
        run_id=first.run_id,
        session_id="mcp-s",
        workflow_slug="mcp-session",
        session=True,
    )
    assert nxt.run_id != first.run_id
    out = await env.kernel.call(nxt.context_id, "kv.get", "g", {"key": "a"}, principal=APP)
    assert out.ok


def test_the_listing_puts_open_runs_first_and_hides_ended_session_runs() -> None:
    runs = [
        {"run_id": "adhoc-3", "workflow_slug": "adhoc", "status": "completed"},
        {"run_id": "pipe-2", "workflow_slug": "pipeline", "status": "completed"},
        {"run_id": "chat-1", "workflow_slug": "chat", "status": "running"},
        {"run_id": "mcp-0", "workflow_slug": "mcp-session", "status": "cancelled"},
    ]
    assert [r["run_id"] for r in listing(runs)] == ["chat-1", "pipe-2", "mcp-0"]
    assert [r["run_id"] for r in listing(runs, everything=True)] == [
        "chat-1",
        "adhoc-3",
        "pipe-2",
        "mcp-0",
    ]


async def test_cli_calls_leave_no_run_running_and_runs_ls_hides_them(tmp_path: Path) -> None:
    project = write_runtime_project(tmp_path / "kv")
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    charter = Path(sys.executable).with_name("charter")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))}

    def cli(*args: str) -> Any:
        proc = subprocess.run(
            [str(charter), *args, "--store", store, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=project,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)

    out = cli(
        "call",
        "kv.get",
        "--profile",
        "all",
        "--as",
        "app",
        "--call-id",
        "c1",
        "--args",
        '{"key": "a"}',
        "--project",
        str(project),
    )
    assert out["status"] == "succeeded"
    run_id = out["run_id"]
    assert [r["run_id"] for r in cli("runs", "ls")] == [run_id]
    # an hour later any runtime that opens (another CLI call) ends the idle run
    from charter.testing.clock import FakeClock

    later = FakeClock(start=_now() + timedelta(seconds=IDLE + 5), step=timedelta(0))
    async with open_runtime(project, store=store, clock=later) as rt:
        row = await rt.store.get_row(run_key(run_id))
        assert row is not None
        assert row["status"] == "completed"
        assert (await verify_run(rt.store, run_id, ledger_key_for(project))).ok
    assert cli("runs", "ls") == []
    assert [r["run_id"] for r in cli("runs", "ls", "--all")] == [run_id]


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)
