"""Crash tests: SIGKILL the process at each fault point of the call path, then restart.

For every fault point a subprocess makes one call (a pre-approved write, or a read) with
``CHARTER_FAULT`` set and dies there by SIGKILL — no cleanup, no flush. A fresh process then
opens the runtime (restart reconciliation runs) and checks, against the tool's own journal:
no tool ran twice, no acknowledged outcome is lost, a call caught in flight is ``unknown``
(``DISPATCH_INTERRUPTED``) and re-submitting it dispatches nothing, while a call killed before
its intent left nothing reserved and dispatches exactly once on retry. An operator's finding
(``charter calls resolve`` or ``Runtime.resolve_call``) is recorded and the call still never
dispatches again; finally the run's ledger verifies (chain, head MAC, projections).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from charter.ledger.verify import verify_run
from charter.runtime import Runtime, ledger_key_for, open_runtime
from tests.kernel._project import runs_of, write_runtime_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DRIVER = Path(__file__).with_name("_driver.py")
CHARTER = Path(sys.executable).with_name("charter")


@dataclass(frozen=True)
class Case:
    point: str  # the fault point, or "in_tool": the tool kills its own process mid-call
    tool: str
    ran: int  # how many times the tool ran before the process died
    resolve_cli: bool  # record the operator's finding through the CLI (else the Python API)

    @property
    def env(self) -> dict[str, str]:
        if self.point == "in_tool":
            return {"KV_DIE_IN_TOOL": "1"}
        return {"CHARTER_FAULT": self.point, "CHARTER_FAULT_TOOL": self.tool}

    @property
    def args(self) -> dict[str, Any]:
        if self.tool == "kv.slow":
            return {"seconds": 0.0}
        return {"key": "crashed", "value": "v", "seconds": 0.0}


CASES = [
    Case("before_intent", "kv.slow_put", ran=0, resolve_cli=False),
    Case("after_intent", "kv.slow_put", ran=0, resolve_cli=True),
    Case("during_dispatch", "kv.slow_put", ran=0, resolve_cli=False),
    Case("in_tool", "kv.slow_put", ran=1, resolve_cli=False),
    Case("after_result", "kv.slow_put", ran=1, resolve_cli=True),
    Case("after_intent", "kv.slow", ran=0, resolve_cli=False),
    Case("after_result", "kv.slow", ran=1, resolve_cli=False),
]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))}
    return {**env, **(extra or {})}


def run_phases(project: Path, store: str, phases: list[dict[str, Any]], out: Path) -> list[Any]:
    spec = {"project": str(project), "store": store, "phases": phases, "out": str(out)}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    done: list[Any] = json.loads(proc.stdout.splitlines()[-1])["phases"]
    return done


async def acknowledged(rt: Runtime, ctx: str) -> dict[str, Any]:
    """Outcomes acknowledged before the crash: an approved write and a read."""
    first = await rt.call(ctx, "kv.put", "ack-w", {"key": "a", "value": "1"}, as_="app")
    assert first.approval is not None
    await rt.approve(first.approval["id"], as_="alice")
    write = await rt.call(ctx, "kv.put", "ack-w", {"key": "a", "value": "1"}, as_="app")
    read = await rt.call(ctx, "kv.get", "ack-r", {"key": "a"}, as_="app")
    assert write.status is read.status is CallStatus.SUCCEEDED
    return {"ack-w": write.data, "ack-r": read.data}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.point}-{c.tool}")
async def test_sigkill_at_fault_point(tmp_path: Path, case: Case) -> None:
    project = write_runtime_project(tmp_path / "kv")
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    write = case.tool == "kv.slow_put"
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
        acks = await acknowledged(rt, ctx.context_id)
        if write:  # approve first; the dying process re-submits the identical call
            pending = await rt.call(ctx.context_id, case.tool, "c1", case.args, as_="app")
            assert pending.approval is not None
            await rt.approve(pending.approval["id"], as_="alice")
    assert runs_of(project, case.tool) == 0

    call = {
        "op": "call",
        "context": ctx.context_id,
        "tool": case.tool,
        "call_id": "c1",
        "args": case.args,
        "as": "app",
    }
    row = {"op": "row", "context": ctx.context_id, "call_id": "c1", "as": "app"}
    ack_rows = [
        {"op": "row", "context": ctx.context_id, "call_id": cid, "as": "app"}
        for cid in ("ack-w", "ack-r")
    ]
    dying, fresh = run_phases(
        project,
        store,
        [{"env": case.env, "steps": [call]}, {"steps": [row, call, row, *ack_rows]}],
        tmp_path / "out",
    )
    assert dying["exit"] == -signal.SIGKILL, dying
    before, resubmitted, after, ack_w, ack_r = fresh["results"]

    # no acknowledged outcome is lost
    assert ack_w["state"] == ack_r["state"] == "succeeded"
    assert ack_w["receipt"]["data"] == acks["ack-w"]
    assert ack_r["receipt"]["data"] == acks["ack-r"]
    assert runs_of(project, "kv.put") == runs_of(project, "kv.get") == 1

    if case.point == "before_intent":
        # nothing was reserved for dispatch: the retry dispatches, once
        assert before["state"] == "pending_approval"
        assert resubmitted["status"] == "succeeded"
        assert resubmitted["metrics"]["cached"] is False
        assert after["state"] == "succeeded"
        assert runs_of(project, case.tool) == 1
        final_state = "succeeded"
    else:
        # caught in flight: unknown, and re-submitting returns that receipt, dispatching nothing
        assert before["state"] == "unknown"
        assert before["receipt"]["error"]["reason"] == "DISPATCH_INTERRUPTED"
        assert resubmitted["status"] == "unknown"
        assert resubmitted["metrics"]["cached"] is True
        assert resubmitted["error"]["reason"] == "DISPATCH_INTERRUPTED"
        assert after["state"] == "unknown"
        assert runs_of(project, case.tool) == case.ran
        final_state = "succeeded" if case.ran else "abandoned"
        await resolve(project, store, ctx.context_id, final_state, case.resolve_cli)
        assert runs_of(project, case.tool) == case.ran

    async with open_runtime(project, store=store) as rt:
        again = await rt.call(ctx.context_id, case.tool, "c1", case.args, as_="app")
        assert again.status.value == final_state
        assert again.metrics.cached is True
        found = await rt.get_call(ctx.context_id, "c1", as_="app")
        assert found.state == final_state
        if case.point != "before_intent":
            assert found.resolution is not None
            assert found.resolution["by"] == "alice"
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project))
        assert report.ok, report.to_dict()
    assert runs_of(project, case.tool) == max(case.ran, 1 if case.point == "before_intent" else 0)
    if case.resolve_cli:  # and the operator's command agrees (the key comes from the project)
        proc = subprocess.run(
            [str(CHARTER), "runs", "verify", ctx.run_id, "--store", store, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
            cwd=project,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["ok"] is True


async def resolve(project: Path, store: str, context: str, outcome: str, cli: bool) -> None:
    reason = "checked the key-value file by hand"
    if not cli:
        async with open_runtime(project, store=store) as rt:
            row = await rt.resolve_call(context, "c1", outcome=outcome, reason=reason, as_="alice")
        assert row.state == outcome
        return
    proc = subprocess.run(
        [
            str(CHARTER),
            "calls",
            "resolve",
            "c1",
            "--context",
            context,
            "--outcome",
            outcome,
            "--reason",
            reason,
            "--as",
            "alice",
            "--project",
            str(project),
            "--store",
            store,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["state"] == outcome
