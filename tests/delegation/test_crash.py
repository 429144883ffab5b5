"""A process killed (SIGKILL) in the middle of a delegating call: the next runtime to open
abandons the orphaned delegating call, records its delegated call in flight ``unknown``, and
keeps the child that finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import charter
from charter.runtime import open_runtime
from tests.delegation import holder
from tests.delegation._project import write_project

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        if proc.poll() is not None:
            out = proc.stderr.read() if proc.stderr else b""
            raise AssertionError(f"the driver exited {proc.returncode}: {out.decode()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("the delegated call never started")
        time.sleep(0.01)


async def test_recovery_abandons_an_orphaned_delegating_call(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    env = {
        **os.environ,
        "DIE_IN_SLOW": "1",
        "PYTHONPATH": os.pathsep.join([str(Path(charter.__file__).parents[1]), str(ROOT)]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.delegation._crash_driver", str(project)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(project / "slow-started", proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    context_id = (project / "context.txt").read_text()

    async with open_runtime(project, store="sqlite:///.charter/charter.db") as rt:  # reconciles
        holder.RUNTIME[:] = [rt]
        parent = await rt.get_call(context_id, "c", as_="app")
        assert parent.state == "abandoned"
        assert parent.receipt is not None
        assert parent.receipt["error"]["reason"] == "DELEGATION_ORPHANED"
        span = parent.row["span_id"]
        done = await rt.get_call(context_id, "c.get", as_="app")
        assert done.state == "succeeded"
        assert done.row["parent_span_id"] == span
        flying = await rt.get_call(context_id, "c.slow", as_="app")
        assert flying.state == "unknown"
        assert flying.receipt is not None
        assert flying.receipt["error"]["reason"] == "DISPATCH_INTERRUPTED"
        assert flying.row["parent_span_id"] == span
        # nothing is left in flight, and the same call id answers with its receipt
        assert not await rt.calls(tenant="acme", state="dispatching")
        again = await rt.call(context_id, "team.crash", "c", {}, as_="app")
        assert again.status.value == "abandoned"
        assert again.metrics.cached
    holder.RUNTIME.clear()
