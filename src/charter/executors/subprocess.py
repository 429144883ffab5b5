"""The subprocess executor: each call runs in a fresh worker process with a hard deadline.

The worker is ``python -m charter.executors._worker`` (protocol in that module), started in
its own session (process group). The request goes as JSON on stdin, the response comes back
as JSON on stdout; stderr is captured, truncated to its last ``max_stderr_bytes`` and
redacted into :attr:`ExecutionOutcome.log`.

Outcomes: when the deadline passes the whole process group is killed with ``SIGKILL`` and the
call is ``unknown`` / ``TIMEOUT``; a worker that exits without a response (crash, OOM kill,
``os._exit``) is ``unknown`` / ``WORKER_LOST``; an unreadable response is ``unknown`` /
``WORKER_PROTOCOL``. A response larger than ``max_response_bytes`` kills the worker and fails
the call with ``resource_limit`` / ``RESULT_TOO_LARGE``.

The worker's environment is this process's, minus every ``CHARTER_*`` variable (deployment
secrets such as API keys are not handed to tool code), unless ``env`` is given. One process
per call: no pool, so no state leaks between calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from charter.contracts.tool_context import Context
from charter.errors import InternalFailure, ResourceLimit, TimeoutFailure
from charter.executors._worker import PROTOCOL
from charter.kernel.executor_port import (
    RESULT_TOO_LARGE,
    TIMEOUT,
    TOOL_NOT_FOUND,
    WORKER_LOST,
    WORKER_PROTOCOL,
    WORKER_START_FAILED,
    ExecutionOutcome,
    ExecutionRequest,
    MessageRedactor,
    ensure_json,
    failed,
    failure_from,
    in_doubt,
    scrub_details,
    unknown,
)

WORKER_MODULE = "charter.executors._worker"
# The directory that holds the ``charter`` package (src/ or site-packages): charter/executors/
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]
_READ_CHUNK = 65536


def context_to_json(context: Context) -> dict[str, Any]:
    """The Context without its threading.Event and progress sink, for the worker to rebuild
    (``ctx.progress`` is a no-op there: it does not cross the process boundary)."""
    local = ("cancelled", "progress_sink")
    return {f.name: getattr(context, f.name) for f in fields(context) if f.name not in local}


def worker_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) minus ``CHARTER_*``, with charter importable."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("CHARTER_")}
    package_parent = str(_PACKAGE_PARENT)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_parent not in paths:
        env["PYTHONPATH"] = os.pathsep.join([package_parent, *paths])
    return env


class SubprocessExecutor:
    """Runs each call in a separate worker process; kills it at the deadline."""

    kind = "subprocess"

    def __init__(
        self,
        *,
        redact_message: MessageRedactor,
        entrypoints: Mapping[str, str],
        root: Path | None = None,
        env: Mapping[str, str] | None = None,
        python: str = sys.executable,
        max_response_bytes: int = 64 * 1024 * 1024,
        max_stderr_bytes: int = 16 * 1024,
    ) -> None:
        self._redact = redact_message
        self._entrypoints = dict(entrypoints)
        # absolute: the worker starts in ``root`` and is told ``root`` too (a relative one,
        # from ``--project demo``, named demo/demo/tools/… there)
        self._root = root.resolve() if root is not None else None
        self._env = worker_environment(env)
        self._python = python
        self._max_response = max_response_bytes
        self._max_stderr = max_stderr_bytes
        self._live: set[anyio.abc.Process] = set()

    async def aclose(self) -> None:
        """Kill every worker still running."""
        for process in list(self._live):
            await _kill(process)

    async def describe(
        self, tool_ids: Iterable[str], *, timeout_s: float = 30.0
    ) -> dict[str, dict[str, Any]]:
        """What the code a worker would run declares for each tool, asked of a fresh worker
        (so an edited file is seen as the next call would see it); nothing is called."""

        def problem(message: str) -> dict[str, Any]:
            return {"version": None, "digest": None, "problem": message}

        ids = list(tool_ids)
        wanted = {t: self._entrypoints[t] for t in ids if t in self._entrypoints}
        out = {t: problem("no worker entrypoint is bound") for t in ids if t not in wanted}
        if not wanted:
            return out
        payload = json.dumps(
            {
                "protocol": PROTOCOL,
                "op": "describe",
                "root": str(self._root) if self._root is not None else None,
                "entrypoints": wanted,
            }
        ).encode("utf-8")
        try:
            process = await anyio.open_process(
                [self._python, "-m", WORKER_MODULE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._root,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            return out | {t: problem(f"the worker could not start: {exc.strerror}") for t in wanted}
        self._live.add(process)
        io = _WorkerIO(process, self._max_response, self._max_stderr)
        try:
            with anyio.move_on_after(timeout_s) as scope:
                await io.run(payload)
        finally:
            await _kill(process)
            self._live.discard(process)
        try:
            if scope.cancelled_caught:
                raise ValueError(f"no answer within {timeout_s:g} s")
            tools = json.loads(bytes(io.stdout))["tools"]
            for t in wanted:
                found = tools[t]
                out[t] = {k: found.get(k) for k in ("version", "digest", "problem")}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            failed_how = str(exc) if scope.cancelled_caught else "a malformed describe answer"
            out |= {t: problem(f"the worker gave {failed_how}") for t in wanted}
        return out

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        ctx = request.context
        tool_id = request.contract.id
        entrypoint = self._entrypoints.get(tool_id)
        if entrypoint is None:
            return failed(
                InternalFailure(
                    f"no worker entrypoint is bound to tool {tool_id}",
                    reason=TOOL_NOT_FOUND,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                dispatched=False,
            )
        payload = json.dumps(
            {
                "protocol": PROTOCOL,
                "root": str(self._root) if self._root is not None else None,
                "entrypoint": entrypoint,
                "arguments": dict(request.arguments),
                "context": context_to_json(ctx),
            }
        ).encode("utf-8")
        try:
            process = await anyio.open_process(
                [self._python, "-m", WORKER_MODULE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._root,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            return failed(
                InternalFailure(
                    f"the worker process could not start: {exc.strerror}",
                    reason=WORKER_START_FAILED,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                dispatched=False,
            )
        self._live.add(process)
        io = _WorkerIO(process, self._max_response, self._max_stderr)
        try:
            with anyio.move_on_after(max(request.deadline_s, 0.0)) as scope:
                await io.run(payload)
        except BaseException:
            ctx.cancelled.set()
            raise
        finally:
            # Always: kill what is left of the process group (stray children too), reap.
            await _kill(process)
            self._live.discard(process)
        log = self._redact(io.stderr_text(), request)
        if scope.cancelled_caught:
            ctx.cancelled.set()
            return unknown(
                TimeoutFailure(
                    f"tool {tool_id} did not finish within {request.deadline_s:g} s; the worker "
                    "was killed and its effect may or may not have happened",
                    reason=TIMEOUT,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                log=log,
            )
        if io.too_large:
            return failed(
                ResourceLimit(
                    f"the worker's response exceeded {self._max_response} bytes",
                    reason=RESULT_TOO_LARGE,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                log=log,
            )
        return self._outcome(io, request, log)

    def _outcome(self, io: _WorkerIO, request: ExecutionRequest, log: str) -> ExecutionOutcome:
        ctx = request.context
        returncode = io.returncode
        if not io.stdout:
            how = (
                f"was killed by signal {-returncode}"
                if returncode is not None and returncode < 0
                else f"exited with status {returncode}"
            )
            return unknown(
                InternalFailure(
                    f"the worker of tool {request.contract.id} {how} without a response; "
                    "its effect may or may not have happened",
                    reason=WORKER_LOST,
                    details={"returncode": returncode},
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                log=log,
            )
        try:
            response = json.loads(io.stdout)
            status = response["status"]
            if status == "succeeded":
                return ExecutionOutcome(
                    status="succeeded", result=ensure_json(response["result"]), log=log
                )
            if status != "failed":
                raise ValueError(status)
            error = response["error"]

            def scrub(text: str) -> str:
                return self._redact(text, request)

            failure = failure_from(
                str(error["code"]),
                str(error["reason"]),
                scrub(str(error["message"])),
                details=scrub_details(error.get("details") or {}, scrub),
                retryable=bool(error.get("retryable", False)),
                call_id=ctx.call_id,
                run_id=ctx.run_id,
            )
            if response.get("in_doubt") is True:  # it ran, and its result is unacceptable
                return replace(in_doubt(failure, read_only=request.contract.read_only), log=log)
            return failed(failure, dispatched=bool(response.get("dispatched", True)), log=log)
        except (ValueError, KeyError, TypeError, AttributeError):
            return unknown(
                InternalFailure(
                    "the worker's response could not be read; the tool's effect may or may "
                    "not have happened",
                    reason=WORKER_PROTOCOL,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                log=log,
            )


_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError)
"""A pipe closed under a drain: the executor closing (``aclose`` kills and closes every
worker while its call still reads); the worker's exit status tells the call what happened."""


class _WorkerIO:
    """Feeds the request and drains stdout (bounded) and stderr (tail kept) concurrently."""

    def __init__(self, process: anyio.abc.Process, max_stdout: int, max_stderr: int) -> None:
        self.process = process
        self.max_stdout = max_stdout
        self.max_stderr = max_stderr
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.stderr_dropped = 0
        self.too_large = False
        self.returncode: int | None = None

    async def run(self, payload: bytes) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._feed, payload)
            tg.start_soon(self._drain_stdout, tg.cancel_scope)
            tg.start_soon(self._drain_stderr)
        if not self.too_large:
            self.returncode = await self.process.wait()

    async def _feed(self, payload: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            await stdin.send(payload)
            await stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the worker died early; its exit status tells the story

    async def _drain_stdout(self, scope: anyio.CancelScope) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        with contextlib.suppress(*_CLOSED):
            async for chunk in stdout:
                self.stdout += chunk
                if len(self.stdout) > self.max_stdout:
                    self.too_large = True
                    scope.cancel()
                    return

    async def _drain_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        with contextlib.suppress(*_CLOSED):
            async for chunk in stderr:
                self.stderr += chunk
                excess = len(self.stderr) - self.max_stderr
                if excess > 0:
                    del self.stderr[:excess]
                    self.stderr_dropped += excess

    def stderr_text(self) -> str:
        text = self.stderr.decode("utf-8", "replace")
        if self.stderr_dropped:
            text = f"[{self.stderr_dropped} earlier bytes of stderr dropped]\n{text}"
        return text


async def _kill(process: anyio.abc.Process) -> None:
    """SIGKILL the worker's whole process group and reap it (shielded from cancellation).

    Also called after a normal exit, to end any child the tool left behind in its group.
    """
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        await process.aclose()
