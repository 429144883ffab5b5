"""Operators end runs: ``cancel`` and ``fail`` from Python, the CLI and HTTP.

Before: ``finish_run`` could only end ``completed`` or ``partial``; a run could not be
cancelled or failed at all, and ad-hoc runs stayed ``running`` forever.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.endings import RunEndings
from charter.kernel.envelope import CallStatus
from charter.ledger.verify import verify_run
from charter.runtime import ledger_key_for, open_runtime
from tests.kernel._project import runs_of, write_runtime_project

pytestmark = pytest.mark.anyio

CHARTER = Path(sys.executable).with_name("charter")
PUT = {"key": "k", "value": "v", "seconds": 0}


def cli(
    project: Path, store: str, *args: str, local: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))}
    where = ["--project", str(project)] if local else []
    return subprocess.run(
        [str(CHARTER), *args, *where, "--store", store, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=project,
        check=False,
    )


async def test_a_run_cancelled_from_the_cli_is_cancelled_in_the_ledger_and_verifies(
    tmp_path: Path,
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
        done = await rt.call(ctx.context_id, "kv.get", "r1", {"key": "a"}, as_="app")
        assert done.status is CallStatus.SUCCEEDED
        waiting = await rt.call(ctx.context_id, "kv.slow_put", "w1", PUT, as_="app")
        assert waiting.status is CallStatus.PENDING_APPROVAL
    proc = cli(
        project, store, "runs", "cancel", ctx.run_id, "--reason", "wrong target", "--as", "alice"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["status"] == "cancelled"
    async with open_runtime(project, store=store) as rt:
        events = [json.loads(r.data) for r in await rt.store.read_stored(ctx.run_id)]
        last = events[-1]
        assert last["type"] == "run_status_changed"
        assert last["payload"]["status"] == "cancelled"
        assert last["payload"]["by"] == "alice"
        assert last["payload"]["reason"] == "wrong target"
        # what waited in the run ended with it
        row = await rt.get_call(ctx.context_id, "w1", as_="app")
        assert row.state == "denied"
        assert waiting.approval is not None
        [approval] = await rt.approvals(as_="alice", status="rejected")
        assert approval.approval_id == waiting.approval["id"]
        # nothing new runs in it; finished receipts stay readable
        later = await rt.call(ctx.context_id, "kv.get", "r2", {"key": "a"}, as_="app")
        assert later.status is CallStatus.DENIED
        assert later.error is not None
        assert later.error["reason"] == "RUN_ENDED"
        again = await rt.call(ctx.context_id, "kv.get", "r1", {"key": "a"}, as_="app")
        assert again.status is CallStatus.SUCCEEDED
        assert again.metrics.cached is True
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project))
        assert report.ok, report.to_dict()
    assert runs_of(project, "kv.get") == 1
    verify = cli(project, store, "runs", "verify", ctx.run_id, local=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # a terminal run accepts no further ending
    twice = cli(project, store, "runs", "fail", ctx.run_id, "--reason", "again", "--as", "alice")
    assert twice.returncode != 0
    assert "RUN_TERMINAL" in twice.stdout + twice.stderr


async def test_only_an_operator_with_a_reason_ends_a_run(tmp_path: Path) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "all")
        with pytest.raises(PermissionDenied) as human:
            await rt.operations.end_run(ctx.run_id, "cancelled", reason="x", as_="app")
        assert human.value.reason == "ENDER_NOT_HUMAN"
        with pytest.raises(InvalidInput) as why:
            await rt.operations.end_run(ctx.run_id, "cancelled", reason="  ", as_="alice")
        assert why.value.reason == "REASON_REQUIRED"
        failed = await rt.operations.end_run(
            ctx.run_id, "failed", reason="the agent looped", as_="alice"
        )
        assert failed["status"] == "failed"
        assert failed["error"]["code"] == "internal"


async def test_a_call_in_flight_is_waited_for(tmp_path: Path) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=f"sqlite:///{tmp_path / 'c.db'}") as rt:
        ctx = await rt.resolve_context("app", "all")
        call = asyncio.create_task(
            rt.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.5}, as_="app")
        )
        while runs_of(project, "kv.slow") == 0:
            await asyncio.sleep(0.01)
        ended = await rt.operations.end_run(ctx.run_id, "cancelled", reason="enough", as_="alice")
        assert ended["status"] == "cancelled"
        out = await call
        assert out.status is CallStatus.SUCCEEDED  # it finished before the run ended
        assert (await rt.get_call(ctx.context_id, "s1", as_="app")).state == "succeeded"


async def test_a_call_still_in_flight_after_the_wait_becomes_unknown(tmp_path: Path) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=f"sqlite:///{tmp_path / 'c.db'}") as rt:
        ctx = await rt.resolve_context("app", "all")
        call = asyncio.create_task(
            rt.call(ctx.context_id, "kv.slow", "s1", {"seconds": 1.0}, as_="app")
        )
        while runs_of(project, "kv.slow") == 0:
            await asyncio.sleep(0.01)
        endings = RunEndings(
            store=rt.store,
            redactor=rt.kernel.redactor,
            fingerprinter=rt.kernel.state.fingerprinter,
            settle_s=0.1,
        )
        ended = await endings.end_run(
            ctx.run_id, "cancelled", reason="stop now", operator=rt.principal("alice")
        )
        assert ended["status"] == "cancelled"
        row = await rt.get_call(ctx.context_id, "s1", as_="app")
        assert row.state == "unknown"
        assert row.receipt["error"]["reason"] == "ENDED_IN_FLIGHT"
        out = await call  # the tool finished later: the recorded unknown stands, no raise
        assert out.status is CallStatus.UNKNOWN
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project))
        assert report.ok, report.to_dict()


async def test_a_run_ended_by_another_process_refuses_new_calls_in_the_same_transaction(
    tmp_path: Path,
) -> None:
    """The kernel does not read the run before an optimistic reservation: the store refuses
    the intent of a new call in an ended run inside the append's transaction, so a run ended
    by another process (this kernel has not seen it end) takes no new call."""
    project = write_runtime_project(tmp_path / "kv")
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
        done = await rt.call(ctx.context_id, "kv.get", "r1", {"key": "a"}, as_="app")
        assert done.status is CallStatus.SUCCEEDED
        proc = await asyncio.to_thread(
            cli, project, store, "runs", "cancel", ctx.run_id, "--reason", "x", "--as", "alice"
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        later = await rt.call(ctx.context_id, "kv.get", "r2", {"key": "a"}, as_="app")
        assert later.status is CallStatus.DENIED
        assert later.error is not None
        assert later.error["reason"] == "RUN_ENDED"
        with pytest.raises(PermissionDenied, match="CALL_NOT_FOUND"):
            await rt.get_call(ctx.context_id, "r2", as_="app")
        again = await rt.call(ctx.context_id, "kv.get", "r1", {"key": "a"}, as_="app")
        assert again.status is CallStatus.SUCCEEDED
        assert again.metrics.cached is True
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project))
        assert report.ok, report.to_dict()


async def test_no_context_is_resolved_in_a_run_that_has_ended(tmp_path: Path) -> None:
    """Before: a context could still be resolved in a cancelled run (``POST /v1/contexts``
    with its ``run`` answered 201); every call in it was then refused."""
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "all")
        again = await rt.resolve_context("app", "all", run_id=ctx.run_id)  # still running
        assert again.run_id == ctx.run_id
        await rt.operations.end_run(ctx.run_id, "cancelled", reason="enough", as_="alice")
        with pytest.raises(PermissionDenied) as ended:
            await rt.resolve_context("app", "all", run_id=ctx.run_id)
        assert ended.value.reason == "RUN_ENDED"
