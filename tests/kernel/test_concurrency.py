"""Idempotency under concurrency: duplicates coalesce onto one execution, counted by the tool.

In one process, 20 coroutines submit the same call at once (memory and SQLite stores); across
processes, 8 drivers share one SQLite file (and one PostgreSQL database) and are released
together. In every case the tool's own journal shows exactly one execution and every caller
gets the same outcome. The store's uniqueness decides, not an in-memory lock: the
cross-process cases have no shared memory at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.authorize import Enablement
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.kernel import Kernel
from charter.kernel.settings import KernelSettings
from charter.runtime import open_runtime
from charter.stores.memory import MemoryStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from tests.kernel._project import runs_of, write_runtime_project
from tests.kernel.conftest import ALICE, APP, KEY, make_kernel

pytestmark = pytest.mark.anyio

DRIVER = Path(__file__).with_name("_driver.py")
DUPLICATES = 20
PROCESSES = 8


@dataclass
class Setup:
    project: Path
    kernel: Kernel


@pytest.fixture(params=["memory", "sqlite"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    project = write_runtime_project(tmp_path / "kv")
    clock = FakeClock(step=timedelta(0))
    settings = KernelSettings(
        enablement=Enablement(enabled=frozenset({"kv.put", "kv.slow_put"})),
        read_retry_backoff_s=0.0,
    )
    if request.param == "memory":
        store: Any = MemoryStore(key=KEY, clock=clock)
        yield Setup(project, make_kernel(project, store, clock, settings=settings))
    else:
        async with SQLiteStore.open(tmp_path / "charter.db", key=KEY, clock=clock) as store:
            yield Setup(project, make_kernel(project, store, clock, settings=settings))


def same_outcome(answers: list[Envelope]) -> None:
    """Every answer has one status and one data, and exactly one of them really ran."""
    assert {a.status for a in answers} == {CallStatus.SUCCEEDED}, [a.to_dict() for a in answers]
    assert len({json.dumps(a.data, sort_keys=True) for a in answers}) == 1
    assert sum(1 for a in answers if not a.metrics.cached) == 1


async def test_concurrent_duplicates_of_a_read_run_once(setup: Setup) -> None:
    ctx = await setup.kernel.resolve_context(APP, "all")
    answers = await asyncio.gather(
        *(
            setup.kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.3}, principal=APP)
            for _ in range(DUPLICATES)
        )
    )
    same_outcome(list(answers))
    assert answers[0].data == {"slept": 0.3}
    assert runs_of(setup.project, "kv.slow") == 1


async def test_concurrent_duplicates_of_an_approved_write_run_once(setup: Setup) -> None:
    kernel = setup.kernel
    ctx = await kernel.resolve_context(APP, "all")
    args = {"key": "k", "value": "v", "seconds": 0.3}
    first = await kernel.call(ctx.context_id, "kv.slow_put", "w1", args, principal=APP)
    assert first.status is CallStatus.PENDING_APPROVAL
    assert first.approval is not None
    await kernel.decide(first.approval["id"], approve=True, principal=ALICE)
    answers = await asyncio.gather(
        *(
            kernel.call(ctx.context_id, "kv.slow_put", "w1", args, principal=APP)
            for _ in range(DUPLICATES)
        )
    )
    same_outcome(list(answers))
    assert answers[0].data == {"key": "k", "written": True}
    assert runs_of(setup.project, "kv.slow_put") == 1
    approval = await kernel.find_approval(first.approval["id"], "acme")
    assert approval is not None
    assert approval.status == "consumed"
    # and once more, after the fact: the receipt, nothing dispatched
    again = await kernel.call(ctx.context_id, "kv.slow_put", "w1", args, principal=APP)
    assert again.metrics.cached is True
    assert runs_of(setup.project, "kv.slow_put") == 1


async def test_concurrent_duplicates_with_different_arguments(setup: Setup) -> None:
    """Half the callers send other arguments: one set wins, the other half conflicts."""
    ctx = await setup.kernel.resolve_context(APP, "all")
    answers = await asyncio.gather(
        *(
            setup.kernel.call(
                ctx.context_id, "kv.slow", "s1", {"seconds": 0.2 + (i % 2) / 10}, principal=APP
            )
            for i in range(DUPLICATES)
        )
    )
    ok = [a for a in answers if a.status is CallStatus.SUCCEEDED]
    conflicts = [a for a in answers if a.status is CallStatus.CONFLICT]
    assert len(ok) == len(conflicts) == DUPLICATES // 2, [a.status for a in answers]
    assert all(
        c.error is not None and c.error["reason"] == "IDEMPOTENCY_CONFLICT" for c in conflicts
    )
    assert len({json.dumps(a.data) for a in ok}) == 1
    assert runs_of(setup.project, "kv.slow") == 1


# ---------------------------------------------------------------------------------------
# across processes


@pytest.fixture
def pg_store_url() -> Iterator[str]:
    from tests.stores.conftest import create_database, drop_database

    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def run_drivers(
    project: Path, store: str, steps: list[dict[str, Any]], count: int, barrier: Path
) -> list[list[Any]]:
    """``count`` driver processes (forked from one that imported Charter once), released
    together once every one has its runtime open; their results in order."""
    barrier.mkdir()
    go = barrier / "go"
    spec = {
        "project": str(project),
        "store": store,
        "steps": steps,
        "fork": count,
        "ready": str(barrier / "ready"),
        "go": str(go),
        "out": str(barrier / "out"),
    }
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), json.dumps(spec)],
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")},
    )
    try:
        for i in range(count):
            while not (barrier / f"ready-{i}").exists():
                if proc.poll() is not None:
                    raise AssertionError(f"the drivers died: {proc.communicate()[1]}")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.01)
        go.touch()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [json.loads((barrier / f"out-{i}.json").read_text())["results"] for i in range(count)]


async def _cross_process(tmp_path: Path, store: str) -> None:
    project = write_runtime_project(tmp_path / "kv")
    # One context, resolved once; its id goes to every driver. Opening here also creates
    # the store's schema, so the drivers race only on the call.
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
    step = {
        "op": "call",
        "context": ctx.context_id,
        "tool": "kv.slow",
        "call_id": "x1",
        "args": {"seconds": 0.5},
        "as": "app",
    }
    results = run_drivers(project, store, [step], PROCESSES, tmp_path / "barrier")
    answers = [r[0] for r in results]
    assert {a["status"] for a in answers} == {"succeeded"}, answers
    assert {json.dumps(a["data"]) for a in answers} == {json.dumps({"slept": 0.5})}
    assert sum(1 for a in answers if not a["metrics"]["cached"]) == 1
    # counted inside the tool: one execution, by one process
    assert runs_of(project, "kv.slow") == 1
    async with open_runtime(project, store=store) as rt:
        row = await rt.get_call(ctx.context_id, "x1", as_="app")
    assert row.state == "succeeded"


@pytest.mark.slow
async def test_duplicates_from_separate_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    await _cross_process(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}")


@pytest.mark.slow
@pytest.mark.postgres
async def test_duplicates_from_separate_processes_on_postgresql(
    tmp_path: Path, pg_store_url: str
) -> None:
    await _cross_process(tmp_path, pg_store_url)
