"""A shielded append starts in the caller's task only when its store vouches for it.

``flight.shielded(..., eager=True)`` runs the work's first step at once: an append that never
waits costs no task. Work that holds an anyio scope across a wait (an audit sink's task group,
a thread hop) must keep running in one task, so it is never started eagerly unless vouched.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import anyio
import pytest

from charter.kernel import flight
from charter.stores.memory import MemoryStore

pytestmark = pytest.mark.anyio

_seen = contextvars.ContextVar("seen", default=0)


async def _at_once() -> int:
    _seen.set(1)  # a task's context is a copy: the caller's stays as it was
    return 7


async def _fails() -> int:
    raise ValueError("no")


async def _in_scopes() -> int:
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep, 0.001)
    return await anyio.to_thread.run_sync(lambda: 3)


async def test_eager_work_that_never_waits_needs_no_task() -> None:
    fl = flight.Flight()
    tasks = len(asyncio.all_tasks())
    assert await flight.shielded(fl, "intent", _at_once(), eager=True) == 7
    assert len(asyncio.all_tasks()) == tasks
    assert _seen.get() == 0
    assert fl.reserved
    with pytest.raises(ValueError):
        await flight.shielded(fl, "outcome", _fails(), eager=True)
    assert fl.outcome is not None
    assert fl.outcome.done()
    assert fl.recorded is None


async def test_eager_work_that_waits_survives_the_callers_cancellation() -> None:
    gate = asyncio.Event()

    async def waits() -> int:
        await gate.wait()
        return 5

    fl = flight.Flight()
    caller = asyncio.ensure_future(flight.shielded(fl, "outcome", waits(), eager=True))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    gate.set()
    await fl.settled()
    assert fl.recorded == 5


async def test_work_holding_anyio_scopes_runs_in_one_task() -> None:
    assert await flight.shielded(flight.Flight(), "outcome", _in_scopes()) == 3


def test_only_a_class_that_vouches_for_its_own_append_is_in_place() -> None:
    class Overrides(MemoryStore):
        async def append(self, *args: Any, **kwargs: Any) -> Any:
            return ()

    assert flight.in_place(MemoryStore.__new__(MemoryStore))
    assert not flight.in_place(Overrides.__new__(Overrides))
    assert not flight.in_place(object())
