"""A store that fails: before the intent nothing ran (failed, retryable later); after the
dispatch the outcome could not be recorded (unknown)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.errors import StoreError
from charter.kernel.envelope import CallStatus
from charter.ledger.events import NewEvent
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import APP, KEY, Env, make_kernel

pytestmark = pytest.mark.anyio


class FlakyStore(MemoryStore):
    """Fails appends whose first event matches ``fail_on`` (a tool_progress stage)."""

    fail_on: str | None = None

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Any:
        if self.fail_on is not None and any(
            e.type == "tool_progress" and e.payload.get("stage") == self.fail_on for e in entries
        ):
            raise StoreError("the database went away", reason="STORE_UNAVAILABLE")
        return await super().append(run_id, entries, expected_seq=expected_seq)


async def test_failure_before_intent_dispatches_nothing(project: Path) -> None:
    clock = FakeClock(step=timedelta(0))
    store = FlakyStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock)
    env = Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)
    ctx = await kernel.resolve_context(APP, "all")
    store.fail_on = "started"
    out = await kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.FAILED
    assert out.error is not None
    assert out.error["reason"] == "STORE_UNAVAILABLE"
    assert env.runs_of("kv.get") == 0
    store.fail_on = None
    again = await kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert again.ok
    assert env.runs_of("kv.get") == 1


async def test_failure_recording_the_outcome_is_unknown(project: Path) -> None:
    clock = FakeClock(step=timedelta(0))
    store = FlakyStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock)
    env = Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)
    ctx = await kernel.resolve_context(APP, "all")
    store.fail_on = "completed"
    out = await kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.UNKNOWN
    assert out.error is not None
    assert out.error["reason"] == "OUTCOME_NOT_RECORDED"
    store.fail_on = None
    row = await kernel.get_call(ctx.context_id, "c1", "acme")
    assert row is not None
    assert row.state == "dispatching"  # the store failed: nothing recorded the outcome
    # this live process holds its lease, yet the call is stranded (no call of it runs any
    # more): a retry settles it at once instead of waiting timeout + grace for "dispatching"
    began = time.monotonic()
    again = await kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert time.monotonic() - began < 5
    assert again.status is CallStatus.UNKNOWN, again
    assert again.error is not None
    assert again.error["reason"] == "DISPATCH_INTERRUPTED"
    row = await kernel.get_call(ctx.context_id, "c1", "acme")
    assert row is not None
    assert row.state == "unknown"
    assert env.runs_of("kv.get") == 1  # never dispatched again


async def test_the_upkeep_reconciles_a_call_this_process_stranded(project: Path) -> None:
    """A call whose outcome the store could not take stays ``dispatching`` only until the
    next upkeep round (``charter serve`` runs it periodically), never for the process's
    lifetime; a call still running in this process is left alone."""
    clock = FakeClock(step=timedelta(0))
    store = FlakyStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock)
    ctx = await kernel.resolve_context(APP, "all")
    store.fail_on = "completed"
    out = await kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.UNKNOWN
    store.fail_on = None
    slow = asyncio.create_task(
        kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.5}, principal=APP)
    )
    while (await kernel.get_call(ctx.context_id, "s1", "acme")) is None:
        await asyncio.sleep(0.01)
    [settled] = await kernel.reconcile()
    assert settled.call_id == "c1"
    row = await kernel.get_call(ctx.context_id, "c1", "acme")
    assert row is not None
    assert row.state == "unknown"
    assert (await slow).status is CallStatus.SUCCEEDED  # running here: never touched
    assert await kernel.reconcile() == []
