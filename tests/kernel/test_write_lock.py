"""The run's write lock holds while a timed-out sync tool's thread still runs.

Before: the kernel released the write lock when the Python executor answered ``unknown`` at
the deadline, while the tool's thread kept running and writing — the next write of the run
ran beside it. Now the lock is held until that thread really ends; the call itself still
answers at its deadline. Times are the tools' own (their journal lines).
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest

from charter.kernel.envelope import CallStatus
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import ALICE, APP, KEY, make_kernel, write_project

pytestmark = pytest.mark.anyio

STUCK = '''

@charter.tool("kv.stuck", effect="write", permissions=["kv:write"], timeout_s=0.2)
def stuck(name: str, seconds: float) -> dict[str, Any]:
    """Write slowly, past the deadline; journal when the thread starts and ends."""
    _journal("kv.stuck", name=name, at=time.time(), edge="start")
    time.sleep(seconds)
    _journal("kv.stuck", name=name, at=time.time(), edge="end")
    return {"name": name}
'''


def stuck_project(root: Path) -> Path:
    write_project(root)
    (root / "tools.py").write_text((root / "tools.py").read_text() + textwrap.dedent(STUCK))
    yaml = (root / "charter.yaml").read_text().replace("kv.of_tenant]", "kv.of_tenant, kv.stuck]")
    (root / "charter.yaml").write_text(yaml)
    return root


async def approved(kernel: object, cid: str, call_id: str, args: dict[str, object]) -> None:
    out = await kernel.call(cid, "kv.stuck", call_id, args, principal=APP)  # type: ignore[attr-defined]
    assert out.approval is not None, out
    await kernel.decide(out.approval["id"], approve=True, principal=ALICE)  # type: ignore[attr-defined]


async def test_a_timed_out_sync_write_keeps_the_write_lock_until_its_thread_ends(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from charter.kernel.authorize import Enablement

    project = stuck_project(tmp_path / "kv")
    clock = FakeClock(step=timedelta(0))
    kernel = make_kernel(project, MemoryStore(key=KEY, clock=clock), clock)
    kernel.settings = replace(
        kernel.settings, enablement=Enablement(enabled=frozenset({"kv.stuck"}))
    )
    ctx = await kernel.resolve_context(APP, "all")
    first, second = {"name": "first", "seconds": 1.0}, {"name": "second", "seconds": 0.0}
    await approved(kernel, ctx.context_id, "w1", first)
    await approved(kernel, ctx.context_id, "w2", second)
    began = time.monotonic()
    timed_out = await kernel.call(ctx.context_id, "kv.stuck", "w1", first, principal=APP)
    assert timed_out.status is CallStatus.UNKNOWN
    assert timed_out.error is not None
    assert timed_out.error["reason"] == "TIMEOUT"
    assert time.monotonic() - began < 0.9  # answered at its deadline, not when the thread ended
    nxt = await kernel.call(ctx.context_id, "kv.stuck", "w2", second, principal=APP)
    assert nxt.status is CallStatus.SUCCEEDED, nxt
    lines = [
        json.loads(line)
        for line in (project / "journal.txt").read_text().splitlines()
        if '"kv.stuck"' in line
    ]
    edges = [(line["name"], line["edge"]) for line in sorted(lines, key=lambda x: x["at"])]
    assert edges == [
        ("first", "start"),
        ("first", "end"),
        ("second", "start"),
        ("second", "end"),
    ], edges
    await asyncio.sleep(0)


async def test_a_write_that_never_got_a_tool_thread_ran_nothing_and_holds_no_lock(
    tmp_path: Path,
) -> None:
    """The tool threads are all busy (here: one thread, taken by a slow read) until past a
    write's deadline. Before: the write answered ``unknown`` / ``TIMEOUT`` though it never
    started, and the run's write lock waited for its thread, which never existed — the run's
    next write hung for good. Now it is ``failed`` / ``TOOL_NOT_STARTED`` and holds nothing."""
    from dataclasses import replace

    from charter.executors.python import PythonExecutor
    from charter.kernel.authorize import Enablement

    project = stuck_project(tmp_path / "kv")
    clock = FakeClock(step=timedelta(0))
    kernel = make_kernel(project, MemoryStore(key=KEY, clock=clock), clock)
    kernel.settings = replace(
        kernel.settings, enablement=Enablement(enabled=frozenset({"kv.stuck"}))
    )
    one_thread = PythonExecutor(
        redact_message=kernel.redactor.message_redactor(),
        root=project,
        entrypoints={"kv.stuck": "tools.py:stuck", "kv.slow": "tools.py:slow"},
        threads=1,
    )
    kernel.executors = {"python": one_thread}
    ctx = await kernel.resolve_context(APP, "all")
    reads = await kernel.resolve_context(APP, "all")
    quick = {"name": "first", "seconds": 0.0}
    await approved(kernel, ctx.context_id, "w1", quick)
    await approved(kernel, ctx.context_id, "w2", {**quick, "name": "second"})
    async with asyncio.TaskGroup() as tg:
        slow = tg.create_task(
            kernel.call(reads.context_id, "kv.slow", "r1", {"seconds": 1.0}, principal=APP)
        )
        while not (project / "journal.txt").exists():
            await asyncio.sleep(0.01)  # the read holds the only tool thread
        out = await kernel.call(ctx.context_id, "kv.stuck", "w1", quick, principal=APP)
        assert out.status is CallStatus.FAILED, out
        assert out.error is not None
        assert (out.error["reason"], out.error["retryable"]) == ("TOOL_NOT_STARTED", True)
    assert slow.result().status is CallStatus.SUCCEEDED  # the tool thread is free again
    async with asyncio.timeout(10):
        nxt = await kernel.call(
            ctx.context_id, "kv.stuck", "w2", {**quick, "name": "second"}, principal=APP
        )
    assert nxt.status is CallStatus.SUCCEEDED, nxt
    lines = (project / "journal.txt").read_text().splitlines()
    names = [line for line in lines if "kv.stuck" in line]
    assert ['"second"' in line for line in names] == [True, True]  # start and end of w2 only


async def test_a_call_cancelled_while_it_waits_for_a_tool_thread_is_cancelled(
    tmp_path: Path,
) -> None:
    """The only tool thread is busy; a second call waits for it and its caller is cancelled
    (an MCP client's notifications/cancelled, a server stopping). Before: recorded ``unknown``
    / ``CALL_CANCELLED`` — its effect in doubt, an operator's to resolve — though its tool
    never started. Now ``cancelled``: nothing ran (the tool never does, even once a thread is
    free)."""
    from charter.executors.python import PythonExecutor

    project = stuck_project(tmp_path / "kv")
    clock = FakeClock(step=timedelta(0))
    kernel = make_kernel(project, MemoryStore(key=KEY, clock=clock), clock)
    kernel.executors = {
        "python": PythonExecutor(
            redact_message=kernel.redactor.message_redactor(),
            root=project,
            entrypoints={"kv.slow": "tools.py:slow"},
            threads=1,
        )
    }
    ctx = await kernel.resolve_context(APP, "all")
    journal = project / "journal.txt"
    async with asyncio.TaskGroup() as tg:
        busy = tg.create_task(
            kernel.call(ctx.context_id, "kv.slow", "r1", {"seconds": 1.0}, principal=APP)
        )
        while not journal.exists():
            await asyncio.sleep(0.01)  # r1 holds the only tool thread
        waiting = tg.create_task(
            kernel.call(ctx.context_id, "kv.slow", "r2", {"seconds": 0.0}, principal=APP)
        )
        await asyncio.sleep(0.3)
        waiting.cancel()
    assert waiting.cancelled()
    assert busy.result().status is CallStatus.SUCCEEDED
    row = await kernel.get_call(ctx.context_id, "r2", "acme")
    assert row is not None
    assert row.state == "cancelled", row
    await asyncio.sleep(0.2)  # the thread is free now: r2 still never runs
    assert [json.loads(line)["call_id"] for line in journal.read_text().splitlines()] == ["r1"]
