"""``Context.cancelled`` behaves as a ``threading.Event`` whose condition is made lazily."""

from __future__ import annotations

import threading
import time

from charter.contracts.tool_context import CancelFlag, Context


def test_a_context_gets_its_own_unset_flag() -> None:
    one = Context(call_id="c1", idempotency_key="k", context_id="x", run_id="r", tool_id="t")
    two = Context(call_id="c2", idempotency_key="k", context_id="x", run_id="r", tool_id="t")
    assert isinstance(one.cancelled, threading.Event)
    assert one.cancelled is not two.cancelled
    assert not one.is_cancelled
    one.cancelled.set()
    assert one.is_cancelled
    assert not two.is_cancelled


def test_set_wakes_a_waiter_in_another_thread() -> None:
    flag = CancelFlag()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(flag.wait(5)))
    waiter.start()
    time.sleep(0.05)
    flag.set()
    waiter.join(5)
    assert woke == [True]
    assert flag.is_set()


def test_wait_times_out_and_clear_unsets() -> None:
    flag = CancelFlag()
    assert flag.wait(0.01) is False
    flag.set()
    assert flag.wait(0) is True
    flag.clear()
    assert not flag.is_set()
    assert "unset" in repr(flag)
