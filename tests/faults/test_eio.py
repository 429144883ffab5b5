"""Fail-stop on storage errors (issue 16): EIO injected for real, at each storage operation
one governed call makes, by an ``LD_PRELOAD`` shim compiled here with ``cc``.

For each position k of the call's storage operations (write, pwrite, writev, fsync,
fdatasync on the SQLite files; 42 for a pre-approved write here) a fresh subprocess fails
operation k alone, and at three positions operation k and every later one (a dead disk).
The tool counts its executions in its own journal. Then a restart (reconciliation runs)
and a resubmission. Always: the tool never runs twice; once a write failed, the store
refuses every later call with ``STORE_FAILED`` before any intent and dispatches nothing; an
answer ``failed`` (nothing started) is never found ``unknown`` or done after the restart,
and an answer ``succeeded`` is found succeeded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from charter.ledger.verify import verify_run
from charter.runtime import ledger_key_for, open_runtime
from tests.kernel._project import journal, runs_of, write_runtime_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SHIM_SOURCE = Path(__file__).with_name("eio_shim.c")
DRIVER = Path(__file__).with_name("eio_driver.py")
MARK = "eio-store.db"


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc")
    assert compiler is not None, "these tests need a C compiler (cc) to build the EIO shim"
    out = tmp_path_factory.mktemp("shim") / "eio.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(SHIM_SOURCE), "-ldl"],
        check=True,
        capture_output=True,
    )
    return out


async def _setup(tmp: Path) -> tuple[Path, str, str, str]:
    project = write_runtime_project(tmp / "kv")
    store = f"sqlite:///{tmp / MARK}"
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
        pending = await rt.call(
            ctx.context_id, "kv.put", "c1", {"key": "a", "value": "1"}, as_="app"
        )
        assert pending.approval is not None
        await rt.approve(pending.approval["id"], as_="alice")
    return project, store, ctx.context_id, ctx.run_id


def _drive(shim: Path, project: Path, store: str, context: str, skip: int, fail: int) -> Any:
    spec = {"project": str(project), "store": store, "context": context, "skip": skip, "fail": fail}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))}
    env.update(LD_PRELOAD=str(shim), CHARTER_EIO_MARK=MARK)
    proc = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


async def _check_case(shim: Path, tmp: Path, skip: int, fail: int) -> str:
    project, store, context, run_id = await _setup(tmp)
    got = _drive(shim, project, store, context, skip, fail)
    first, after = got["first"], got["after"]
    assert runs_of(project, "kv.put") <= 1
    if got["failure"] is not None:  # fail-stop: the next call is refused before any intent
        assert after["status"] == "failed", after
        assert after["error"]["reason"] == "STORE_FAILED"
        assert not [j for j in journal(project) if j.get("call_id") == "c2"]
        assert got["readyz"]["status"] == 503
        [store_check] = [c for c in got["readyz"]["body"]["checks"] if c["name"] == "store"]
        assert store_check["reason"] == "STORE_FAILED"
    else:
        assert got["readyz"]["status"] == 200
    status = first["status"]
    ran = runs_of(project, "kv.put")
    async with open_runtime(project, store=store) as rt:  # restart: reconciliation runs
        row = await rt.get_call(context, "c1", as_="app")
        if status == "failed":  # told "failed, nothing started"
            assert ran == 0
            assert row.state not in ("unknown", "dispatching", "succeeded"), row
        elif status == "succeeded":
            assert ran == 1
            assert row.state == "succeeded", row
        else:
            assert status == "unknown", first
        again = await rt.call(context, "kv.put", "c1", {"key": "a", "value": "1"}, as_="app")
        if status == "failed":
            assert again.status is CallStatus.SUCCEEDED  # dispatched now, for the first time
        report = await verify_run(rt.store, run_id, ledger_key_for(project))
        assert report.ok, report.to_dict()
    assert runs_of(project, "kv.put") <= 1  # never twice
    return f"{status}/{row.state}->{again.status.value}"


async def test_eio_at_each_storage_operation_of_a_call(shim: Path, tmp_path: Path) -> None:
    project, store, context, _ = await _setup(tmp_path / "count")
    clean = _drive(shim, project, store, context, 0, 0)
    assert clean["first"]["status"] == "succeeded"
    assert clean["failure"] is None
    count = clean["ops"]
    assert count >= 4  # intent and outcome: each at least a WAL write and an fsync
    seen: dict[str, list[str]] = {}
    # operation k alone, for every k; operation k and every later one (a dead disk) at the
    # first, middle and last position (it answered the same at every k when run for all)
    cases = [(k, 1) for k in range(count)] + [(k, -1) for k in (0, count // 2, count - 1)]
    for k, fail in cases:
        outcome = await _check_case(shim, tmp_path / f"k{k}-{fail}", k, fail)
        seen.setdefault(outcome, []).append(f"{k}/{fail}")
    print(f"{count} storage operations per call; outcomes: {seen}")
