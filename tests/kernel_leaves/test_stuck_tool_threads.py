"""A sync tool that outlives its deadline holds its worker thread until it returns: the
executor counts it (``tool_threads()``: busy, and stuck — held by a call already answered)
and logs a warning naming the tool and the call. Before, nothing told: the call answered
``unknown`` / ``TIMEOUT`` and the thread stayed taken, uncounted, for as long as the tool ran."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import anyio
import pytest

from charter.executors.python import PythonExecutor
from charter.kernel.executor_port import ToolThreadUse

from .conftest import request

pytestmark = pytest.mark.anyio


async def test_a_timed_out_sync_tool_is_counted_stuck_until_it_returns(
    redact_message: Any, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(10)  # a real sync tool, blocked past its deadline
        return "late"

    executor = PythonExecutor(
        redact_message=redact_message, functions={"demo.hang": hang}, threads=3
    )
    assert executor.tool_threads() == ToolThreadUse(capacity=3, busy=0, stuck=0)
    with caplog.at_level(logging.WARNING, logger="charter.executors.python"):
        outcome = await executor.execute(request("demo.hang", deadline_s=0.2, call_id="c-hang"))
    assert (outcome.status, outcome.error and outcome.error.reason) == ("unknown", "TIMEOUT")
    assert executor.tool_threads() == ToolThreadUse(capacity=3, busy=1, stuck=1)
    [line] = [r.getMessage() for r in caplog.records if "past its deadline" in r.getMessage()]
    assert "demo.hang" in line
    assert "c-hang" in line

    release.set()  # the tool returns: its thread is free again
    deadline = time.monotonic() + 5
    while executor.tool_threads().busy and time.monotonic() < deadline:
        await anyio.sleep(0.01)
    assert executor.tool_threads() == ToolThreadUse(capacity=3, busy=0, stuck=0)


async def test_a_tool_that_answers_in_time_is_never_stuck(redact_message: Any) -> None:
    def quick() -> int:
        return 1

    executor = PythonExecutor(redact_message=redact_message, functions={"demo.quick": quick})
    outcome = await executor.execute(request("demo.quick"))
    assert outcome.status == "succeeded"
    assert executor.tool_threads() == ToolThreadUse(capacity=40, busy=0, stuck=0)
