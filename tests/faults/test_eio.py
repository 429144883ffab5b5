"""Fail-stop on storage errors (issue 16): EIO injected for real, at each storage operation
one governed call makes, by an ``LD_PRELOAD`` shim compiled here with ``cc``.

For each position k of the call's storage operations (write, pwrite, writev, fsync,
fdatasync on the SQLite files; 42 for a pre-approved write here) a fresh process fails
operation k alone (a child forked, one per case, from a driver process that imported
Charter once and opened nothing), and at three positions operation k and every later one (a
dead disk). The tool counts its executions in its own journal. Then a restart
(reconciliation runs) and a resubmission. Always: the tool never runs twice; once a write
failed, the store refuses every later call with ``STORE_FAILED`` before any intent and
dispatches nothing; an answer ``failed`` (nothing started) is never found ``unknown`` or
done after the restart, and an answer ``succeeded`` is found succeeded.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
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


class _Driver:
    """One ``eio_driver.py --serve`` process under the shim: it imports Charter once and
    forks a fresh child for each case (see the driver's docstring)."""

    def __init__(self, shim: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))}
        env.update(LD_PRELOAD=str(shim), CHARTER_EIO_MARK=MARK)
        self.log = log
        self._stderr = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )

    def run(self, spec: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        line = self.proc.stdout.readline() if ready else ""
        got = json.loads(line) if line else {"error": "no answer within 120 s"}
        assert "error" not in got, (got, self.log.read_text()[-3000:])
        return got

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._stderr.close()


@pytest.fixture(scope="module")
def driver(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Driver]:
    served = _Driver(shim, tmp_path_factory.mktemp("driver") / "stderr.log")
    try:
        yield served
    finally:
        served.close()


def _drive(driver: _Driver, project: Path, store: str, context: str, skip: int, fail: int) -> Any:
    spec = {"project": str(project), "store": store, "context": context, "skip": skip, "fail": fail}
    return driver.run(spec)


async def _check_case(driver: _Driver, tmp: Path, skip: int, fail: int) -> str:
    project, store, context, run_id = await _setup(tmp)
    got = _drive(driver, project, store, context, skip, fail)
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


async def test_eio_at_each_storage_operation_of_a_call(driver: _Driver, tmp_path: Path) -> None:
    project, store, context, _ = await _setup(tmp_path / "count")
    clean = _drive(driver, project, store, context, 0, 0)
    assert clean["first"]["status"] == "succeeded"
    assert clean["failure"] is None
    count = clean["ops"]
    assert count >= 4  # intent and outcome: each at least a WAL write and an fsync
    seen: dict[str, list[str]] = {}
    # operation k alone, for every k; operation k and every later one (a dead disk) at the
    # first, middle and last position (it answered the same at every k when run for all)
    cases = [(k, 1) for k in range(count)] + [(k, -1) for k in (0, count // 2, count - 1)]
    for k, fail in cases:
        outcome = await _check_case(driver, tmp_path / f"k{k}-{fail}", k, fail)
        seen.setdefault(outcome, []).append(f"{k}/{fail}")
    print(f"{count} storage operations per call; outcomes: {seen}")
