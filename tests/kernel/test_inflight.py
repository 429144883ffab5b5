"""No run status change while one of its tool calls is in flight; the kernel's own approval
bookkeeping is exempt."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from charter.errors import InvalidInput
from charter.kernel.inflight import CallsInFlight
from charter.ledger.events import NewEvent
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import APP, KEY, make_kernel

pytestmark = pytest.mark.anyio


async def test_run_cannot_finish_while_a_call_is_dispatching(project: Path) -> None:
    clock = FakeClock(step=timedelta(0))
    guard = CallsInFlight()
    store = MemoryStore(key=KEY, clock=clock, in_flight=guard)
    guard.store = store  # type: ignore[assignment]
    kernel = make_kernel(project, store, clock)
    ctx = await kernel.resolve_context(APP, "all")
    started = project / "journal.txt"
    call = asyncio.create_task(
        kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 1.0}, principal=APP)
    )
    for _ in range(500):
        if started.exists():
            break
        await asyncio.sleep(0.01)
    finish = [NewEvent(type="run_status_changed", payload={"status": "completed"})]
    with pytest.raises(InvalidInput) as info:
        await store.append(ctx.run_id, finish)
    assert info.value.reason == "CALL_IN_FLIGHT"
    assert info.value.details["call_ids"] == ["s1"]
    assert (await call).ok
    await store.append(ctx.run_id, finish)


async def test_approval_bookkeeping_is_not_blocked(project: Path) -> None:
    clock = FakeClock(step=timedelta(0))
    guard = CallsInFlight()
    store = MemoryStore(key=KEY, clock=clock, in_flight=guard)
    guard.store = store  # type: ignore[assignment]
    kernel = make_kernel(project, store, clock)
    ctx = await kernel.resolve_context(APP, "all")
    slow = asyncio.create_task(
        kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.5}, principal=APP)
    )
    for _ in range(500):
        if (project / "journal.txt").exists():
            break
        await asyncio.sleep(0.01)
    pending = await kernel.call(
        ctx.context_id, "kv.put", "p1", {"key": "k", "value": "v"}, principal=APP
    )
    assert pending.status.value == "pending_approval"
    assert (await slow).ok
