"""The worker process of the subprocess executor: ``python -m charter.executors._worker``.

Protocol ``charter.worker.v1``: one request as JSON on stdin, one response as JSON on stdout,
then exit. Everything the tool prints — to ``sys.stdout`` or to file descriptor 1 — goes to
stderr instead, so it cannot corrupt the response. Request::

    {"protocol": "charter.worker.v1", "root": "/project" | null,
     "entrypoint": "tools/notes.py:add" | "package.module:function",
     "arguments": {...}, "context": {call_id, idempotency_key, context_id, run_id, ...}}

Response: ``{"status": "succeeded", "result": ...}`` or ``{"status": "failed", "dispatched":
bool, "error": {code, reason, message, retryable, details, exception}}``. Messages are not
redacted here; the parent process redacts everything it receives.

A describe request (readiness: what the code declares now, imported fresh as a call would)::

    {"protocol": "charter.worker.v1", "op": "describe", "root": ..., "entrypoints": {id: ep}}

answers ``{"status": "described", "tools": {id: {"version", "digest", "problem"}}}`` (see
:func:`charter.executors.python.declared_by`); nothing is called.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import sys
import traceback
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from charter.contracts.tool_context import Context
from charter.errors import ErrorCode, Failure
from charter.kernel.executor_port import (
    ARGS_MISMATCH,
    TOOL_IMPORT_FAILED,
    TOOL_NOT_FOUND,
    TOOL_RAISED,
    WORKER_PROTOCOL,
    ensure_json,
)

PROTOCOL = "charter.worker.v1"


def _error(
    code: str, reason: str, message: str, *, dispatched: bool, **extra: Any
) -> dict[str, Any]:
    error = {"code": code, "reason": reason, "message": message, "retryable": False}
    error.update(extra)
    return {"status": "failed", "dispatched": dispatched, "error": error}


def _load(root: str | None, entrypoint: str) -> Callable[..., Any]:
    target, sep, qualname = entrypoint.partition(":")
    if not sep or not target or not qualname:
        raise LookupError(entrypoint)
    obj: Any
    if target.endswith(".py"):
        if root is None:
            raise LookupError(entrypoint)
        from charter.executors.python import resolve_entrypoint

        return resolve_entrypoint(Path(root), entrypoint)
    obj = importlib.import_module(target)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise LookupError(entrypoint)
    return typing.cast(Callable[..., Any], obj)


def _describe(request: dict[str, Any]) -> dict[str, Any]:
    from charter.executors.python import declared_by

    root = request.get("root")
    tools: dict[str, Any] = {}
    for tool_id, entrypoint in dict(request["entrypoints"]).items():
        try:
            found = declared_by(_load(root, str(entrypoint)))
        except Exception as exc:
            found = {"version": None, "digest": None, "problem": f"{type(exc).__name__}: {exc}"}
        tools[str(tool_id)] = found
    return {"status": "described", "tools": tools}


def handle(raw: bytes) -> dict[str, Any]:
    """Run one request; always returns a response (never raises for a tool's exception)."""
    try:
        request = json.loads(raw)
        if not isinstance(request, dict) or request.get("protocol") != PROTOCOL:
            raise ValueError("not a charter.worker.v1 request")
        if request.get("op") == "describe":
            return _describe(request)
        entrypoint = str(request["entrypoint"])
        arguments = dict(request["arguments"])
        context = Context(**request["context"])
        root = request.get("root")
    except (ValueError, KeyError, TypeError):
        return _error("internal", WORKER_PROTOCOL, "malformed worker request", dispatched=False)

    try:
        function = _load(root, entrypoint)
    except LookupError:
        return _error("internal", TOOL_NOT_FOUND, f"{entrypoint} was not found", dispatched=False)
    except Exception as exc:
        return _error(
            "internal",
            TOOL_IMPORT_FAILED,
            f"importing {entrypoint} failed: {type(exc).__name__}: {exc}",
            dispatched=False,
        )

    from charter.executors.python import context_param_of

    param = context_param_of(function)
    if param is not None:
        arguments[param] = context
    try:
        inspect.signature(function).bind(**arguments)
    except TypeError:
        return _error(
            "invalid_input",
            ARGS_MISMATCH,
            "the arguments do not fit the tool's signature",
            dispatched=False,
        )

    try:
        if inspect.iscoroutinefunction(function):
            result = asyncio.run(function(**arguments))
        else:
            result = function(**arguments)
    except Failure as exc:
        return _error(
            exc.code.value,
            exc.reason,
            exc.message,
            dispatched=True,
            retryable=exc.retryable,
            details=_plain(exc.details),
            exception=type(exc).__name__,
        )
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return _error(
            ErrorCode.INTERNAL.value,
            TOOL_RAISED,
            f"tool raised {type(exc).__name__}: {exc}",
            dispatched=True,
            details={"exception": type(exc).__name__},
        )
    try:
        return {"status": "succeeded", "result": ensure_json(result)}
    except Failure as exc:  # it ran: the parent makes a write's outcome unknown, not failed
        answer = _error(
            exc.code.value, exc.reason, exc.message, dispatched=True, details=exc.details
        )
        return {**answer, "in_doubt": True}


def _plain(details: Any) -> Any:
    try:
        return ensure_json(details)
    except Failure:
        return {}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def main() -> int:
    response_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the tool prints goes to stderr, not into the response
    sys.stdout = sys.stderr
    raw = sys.stdin.buffer.read()
    response = handle(raw)
    sys.stderr.flush()
    _write_all(response_fd, json.dumps(response).encode("ascii"))
    os.close(response_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
