"""The subprocess executor: a worker process per call, killed at the deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.errors import ErrorCode
from charter.executors.subprocess import SubprocessExecutor, _WorkerIO, worker_environment

from .conftest import CANARY, process_gone, request

pytestmark = pytest.mark.anyio

ENTRYPOINTS = {
    f"demo.{name}": f"tools/sample.py:{name}"
    for name in (
        "add",
        "whoami",
        "async_echo",
        "boom",
        "refuse",
        "not_json",
        "chatty",
        "suicide",
        "hang",
    )
}


@pytest.fixture
def executor(tool_project: Path, redact_message: Any) -> SubprocessExecutor:
    return SubprocessExecutor(
        redact_message=redact_message, root=tool_project, entrypoints=ENTRYPOINTS
    )


async def test_success_with_context_rebuilt_in_the_worker(executor: SubprocessExecutor) -> None:
    requests = {
        "add": request("demo.add", {"a": 20, "b": 22}),
        "who": request("demo.whoami", {}, call_id="c-9"),
        "echo": request("demo.async_echo", {"text": "hi"}),
    }
    outcomes: dict[str, Any] = {}

    async def run(name: str) -> None:
        outcomes[name] = await executor.execute(requests[name])

    async with anyio.create_task_group() as tg:  # one worker process each, concurrently
        for name in requests:
            tg.start_soon(run, name)
    add = outcomes["add"]
    assert (add.status, add.result, add.dispatched) == ("succeeded", 42, True)
    assert outcomes["who"].result == {
        "call_id": "c-9",
        "key": "idem-c-9",
        "tenant": "acme",
        "run_id": "run-1",
    }
    assert outcomes["echo"].result == {"echo": "hi"}


async def test_tool_output_cannot_corrupt_the_response(executor: SubprocessExecutor) -> None:
    outcome = await executor.execute(request("demo.chatty", {}))
    assert (outcome.status, outcome.result) == ("succeeded", "ok")
    assert "noise on stdout" in outcome.log
    assert "more noise on fd 1" in outcome.log
    assert "stderr line" in outcome.log


async def test_exception_is_failed_and_redacted(executor: SubprocessExecutor) -> None:
    outcome = await executor.execute(request("demo.boom", {"password": CANARY}))
    assert outcome.status == "failed"
    assert outcome.dispatched
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.reason) == (ErrorCode.INTERNAL, "TOOL_RAISED")
    assert CANARY not in outcome.error.message
    assert CANARY not in outcome.log  # the traceback on stderr is redacted too
    assert "RuntimeError" in outcome.log


async def test_charter_failure_keeps_code_and_reason(executor: SubprocessExecutor) -> None:
    outcome = await executor.execute(request("demo.refuse", {}))
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.TRANSIENT_EXTERNAL
    assert outcome.error.reason == "BACKEND_DOWN"
    assert outcome.error.retryable


async def test_non_json_result(executor: SubprocessExecutor) -> None:
    outcome = await executor.execute(request("demo.not_json", {}))
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.CONTRACT_VIOLATION
    assert outcome.error.reason == "RESULT_NOT_JSON"


async def test_a_write_whose_worker_returned_no_json_is_unknown(
    executor: SubprocessExecutor,
) -> None:
    """The worker ran the tool (its effect is done) and the result is not JSON: ``failed``
    would invite a retry under a new call id that repeats the effect, so it is ``unknown``
    for any effect but ``read``."""
    outcome = await executor.execute(request("demo.not_json", {}, effect="write"))
    assert (outcome.status, outcome.reason) == ("unknown", "RESULT_NOT_JSON")
    assert outcome.error is not None
    assert outcome.error.details == {"pointer": "/ids"}


async def test_worker_that_kills_itself_is_unknown_worker_lost(
    executor: SubprocessExecutor, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    outcome = await executor.execute(request("demo.suicide", {"pid_file": str(pid_file)}))
    assert outcome.status == "unknown"
    assert outcome.error is not None
    assert outcome.error.reason == "WORKER_LOST"
    assert outcome.error.details == {"returncode": -9}
    assert process_gone(int(pid_file.read_text()))


async def test_hanging_worker_is_killed_at_the_deadline(
    executor: SubprocessExecutor, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    # The worker must start and write its pid file before the deadline: on a loaded machine a
    # worker's start can take seconds, so the deadline is sized from one measured start.
    started = time.monotonic()
    warm = await executor.execute(request("demo.add", {"a": 1, "b": 2}))
    assert warm.status == "succeeded"
    deadline = max(3.0, 4 * (time.monotonic() - started))
    req = request("demo.hang", {"pid_file": str(pid_file)}, deadline_s=deadline)
    outcome = await executor.execute(req)
    assert outcome.status == "unknown"
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.reason) == (ErrorCode.TIMEOUT, "TIMEOUT")
    assert req.context.is_cancelled
    worker, child = (int(p) for p in pid_file.read_text().split())
    assert process_gone(worker)
    with anyio.fail_after(10):  # the grandchild was in the killed process group too
        while not process_gone(child):
            await anyio.sleep(0.02)


async def test_unknown_tool_and_bad_arguments_are_refused_before_dispatch(
    executor: SubprocessExecutor,
) -> None:
    missing = await executor.execute(request("demo.nothing", {}))
    assert (missing.status, missing.reason, missing.dispatched) == (
        "failed",
        "TOOL_NOT_FOUND",
        False,
    )
    mismatch = await executor.execute(request("demo.add", {"a": 1}))
    assert (mismatch.status, mismatch.reason, mismatch.dispatched) == (
        "failed",
        "ARGS_MISMATCH",
        False,
    )


async def test_worker_that_cannot_start_is_refused_before_dispatch(
    tool_project: Path, redact_message: Any
) -> None:
    executor = SubprocessExecutor(
        redact_message=redact_message,
        root=tool_project,
        entrypoints=ENTRYPOINTS,
        python=str(tool_project / "no-such-python"),
    )
    outcome = await executor.execute(request("demo.add", {"a": 1, "b": 2}))
    assert (outcome.status, outcome.reason, outcome.dispatched) == (
        "failed",
        "WORKER_START_FAILED",
        False,
    )


async def test_oversized_response_is_a_resource_limit(
    tool_project: Path, redact_message: Any
) -> None:
    (tool_project / "tools" / "big.py").write_text("def big():\n    return 'x' * 100000\n")
    executor = SubprocessExecutor(
        redact_message=redact_message,
        root=tool_project,
        entrypoints={"demo.big": "tools/big.py:big"},
        max_response_bytes=1000,
    )
    outcome = await executor.execute(request("demo.big", {}))
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.reason) == (
        ErrorCode.RESOURCE_LIMIT,
        "RESULT_TOO_LARGE",
    )


def test_worker_environment_drops_charter_secrets() -> None:
    env = worker_environment({"CHARTER_KEY_APP": CANARY, "HOME": "/home/x", "PYTHONPATH": "/a"})
    assert "CHARTER_KEY_APP" not in env
    assert env["HOME"] == "/home/x"
    assert env["PYTHONPATH"].split(os.pathsep)[-1] == "/a"


async def test_aclose_kills_running_workers(executor: SubprocessExecutor, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    outcomes = []

    async def run() -> None:
        outcomes.append(await executor.execute(request("demo.hang", {"pid_file": str(pid_file)})))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(20):
            while not pid_file.exists() or not pid_file.read_text():
                await anyio.sleep(0.02)
        await executor.aclose()
    assert outcomes[0].status == "unknown"
    assert outcomes[0].reason == "WORKER_LOST"
    assert process_gone(int(pid_file.read_text().split()[0]))


async def test_pipes_closed_under_a_running_call_end_its_reads_quietly() -> None:
    """``aclose`` kills and closes a worker while its call still reads the pipes; under load
    the close came first and the drains raised ``ClosedResourceError`` out of the call
    (seen once in the full suite) instead of letting the exit status tell what happened."""
    process = await anyio.open_process(
        ["sleep", "30"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    io = _WorkerIO(process, 1 << 20, 1 << 16)
    async with anyio.create_task_group() as tg:
        tg.start_soon(io.run, b"{}")
        await anyio.sleep(0.05)  # both drains wait for data
        assert process.stdout is not None
        assert process.stderr is not None
        await process.stderr.aclose()
        await process.stdout.aclose()
        os.killpg(process.pid, signal.SIGKILL)
    assert io.returncode == -signal.SIGKILL
