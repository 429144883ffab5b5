"""The in-process executor: sync/async, Context injection, deadlines, failures, results."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.contracts.tool_context import Context
from charter.errors import ErrorCode, TransientExternal
from charter.executors.python import PythonExecutor
from charter.kernel.redaction import REDACTED, Redactor

from .conftest import CANARY, request

pytestmark = pytest.mark.anyio


def make(redact_message: Any, **functions: Any) -> PythonExecutor:
    mapping = {f"demo.{name}": fn for name, fn in functions.items()}
    return PythonExecutor(redact_message=redact_message, functions=mapping)


async def test_sync_function_runs_in_a_worker_thread(redact_message: Any) -> None:
    seen: list[str] = []

    def add(a: int, b: int) -> int:
        seen.append(threading.current_thread().name)
        return a + b

    outcome = await make(redact_message, add=add).execute(request("demo.add", {"a": 2, "b": 3}))
    assert outcome.status == "succeeded"
    assert outcome.result == 5
    assert outcome.dispatched
    assert outcome.attempts == 1
    assert seen
    assert seen[0] != threading.main_thread().name


async def test_async_function_runs_natively(redact_message: Any) -> None:
    seen: list[str] = []

    async def echo(text: str) -> dict[str, Any]:
        seen.append(threading.current_thread().name)
        await anyio.sleep(0)
        return {"echo": text, "items": (1, 2)}

    outcome = await make(redact_message, echo=echo).execute(request("demo.echo", {"text": "hi"}))
    assert outcome.status == "succeeded"
    assert outcome.result == {"echo": "hi", "items": [1, 2]}  # tuples become lists
    assert seen == [threading.main_thread().name]


async def test_context_is_injected_by_annotation(redact_message: Any) -> None:
    def whoami(ctx: Context, greeting: str) -> dict[str, Any]:
        return {
            "call": ctx.call_id,
            "key": ctx.idempotency_key,
            "tenant": ctx.tenant,
            "greeting": greeting,
        }

    outcome = await make(redact_message, whoami=whoami).execute(
        request("demo.whoami", {"greeting": "hello"}, call_id="c-42")
    )
    assert outcome.result == {
        "call": "c-42",
        "key": "idem-c-42",
        "tenant": "acme",
        "greeting": "hello",
    }


async def test_entrypoint_is_imported_once_and_gets_its_declared_context(
    redact_message: Any, tool_project: Path
) -> None:
    executor = PythonExecutor(
        redact_message=redact_message,
        root=tool_project,
        entrypoints={"demo.add": "tools/sample.py:add", "demo.whoami": "tools/sample.py:whoami"},
    )
    first = await executor.execute(request("demo.add", {"a": 1, "b": 1}))
    (tool_project / "tools" / "sample.py").write_text("raise SystemExit('must not re-import')")
    second = await executor.execute(request("demo.add", {"a": 2, "b": 2}))
    assert (first.result, second.result) == (2, 4)
    # whoami lives in the same (already imported) module; its Context parameter is injected
    who = await executor.execute(request("demo.whoami", {}, call_id="c-7"))
    assert who.result == {"call_id": "c-7", "key": "idem-c-7", "tenant": "acme", "run_id": "run-1"}


async def test_sync_timeout_is_unknown_and_sets_the_cancellation_flag(
    redact_message: Any,
) -> None:
    started = threading.Event()
    release = threading.Event()
    flags: list[bool] = []

    def slow(ctx: Context) -> str:
        started.set()
        release.wait(timeout=30)
        flags.append(ctx.is_cancelled)
        return "late"

    req = request("demo.slow", {}, deadline_s=0.05)
    outcome = await make(redact_message, slow=slow).execute(req)
    assert outcome.status == "unknown"
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.TIMEOUT
    assert outcome.reason == "TIMEOUT"
    assert outcome.dispatched
    assert req.context.cancelled.is_set()
    assert started.is_set()
    release.set()  # the abandoned thread finishes; its late result is discarded
    with anyio.fail_after(10):
        while not flags:
            await anyio.sleep(0.01)
    assert flags == [True]


async def test_async_timeout_cancels_the_coroutine(redact_message: Any) -> None:
    cancelled = []

    async def slow() -> str:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "never"

    req = request("demo.slow", {}, deadline_s=0.05)
    outcome = await make(redact_message, slow=slow).execute(req)
    assert (outcome.status, outcome.reason) == ("unknown", "TIMEOUT")
    assert cancelled == [True]
    assert req.context.is_cancelled


async def test_exception_fails_with_internal_and_a_redacted_message(redact_message: Any) -> None:
    def login(user: str, password: str) -> None:
        raise RuntimeError(f"login failed for {user} with {password}")

    outcome = await make(redact_message, login=login).execute(
        request("demo.login", {"user": "bob", "password": CANARY})
    )
    assert outcome.status == "failed"
    assert outcome.dispatched
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.INTERNAL
    assert outcome.error.reason == "TOOL_RAISED"
    assert CANARY not in outcome.error.message
    assert REDACTED in outcome.error.message
    assert "bob" in outcome.error.message
    assert outcome.error.call_id == "call-1"


async def test_secret_under_a_contract_pointer_is_scrubbed_from_messages() -> None:
    def connect(target: dict[str, str]) -> None:
        raise ValueError(f"cannot reach {target['dsn']}")

    executor = PythonExecutor(
        redact_message=Redactor().message_redactor(), functions={"demo.connect": connect}
    )
    outcome = await executor.execute(
        request("demo.connect", {"target": {"dsn": CANARY}}, redact=("/target/dsn",))
    )
    assert outcome.error is not None
    assert CANARY not in outcome.error.message


async def test_a_charter_failure_keeps_its_code_and_reason(redact_message: Any) -> None:
    def fetch(token: str) -> None:
        raise TransientExternal(
            f"upstream said no to {token}",
            reason="UPSTREAM_DOWN",
            retryable=True,
            details={"hint": f"token {token}"},
        )

    outcome = await make(redact_message, fetch=fetch).execute(
        request("demo.fetch", {"token": CANARY})
    )
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.TRANSIENT_EXTERNAL
    assert outcome.error.reason == "UPSTREAM_DOWN"
    assert outcome.error.retryable
    assert CANARY not in outcome.error.message
    assert CANARY not in str(outcome.error.details)


@pytest.mark.parametrize(
    ("value", "pointer"),
    [
        ({"ids": {1, 2}}, "/ids"),
        ([1, float("nan")], "/1"),
        ({1: "x"}, "/"),
        (object(), "/"),
        ({"a": [b"raw"]}, "/a/0"),
        ("\ud800", "/"),
    ],
)
async def test_non_json_result_is_a_contract_violation(
    redact_message: Any, value: Any, pointer: str
) -> None:
    outcome = await make(redact_message, odd=lambda: value).execute(request("demo.odd", {}))
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.CONTRACT_VIOLATION
    assert outcome.error.reason == "RESULT_NOT_JSON"
    assert outcome.error.details == {"pointer": pointer}


@pytest.mark.parametrize(("effect", "status"), [("write", "unknown"), ("proposal", "unknown")])
async def test_a_write_that_ran_and_returned_no_json_is_unknown(
    redact_message: Any, effect: str, status: str
) -> None:
    """The tool ran (its effect is done) and returned a set: ``failed`` would invite a retry
    under a new call id that repeats the effect; like a result that breaks the result
    schema, it is ``unknown`` for any effect but ``read`` (docs/executors.md)."""
    ran: list[int] = []

    def odd() -> Any:
        ran.append(1)
        return {"ids": {1, 2}}

    outcome = await make(redact_message, odd=odd).execute(request("demo.odd", {}, effect=effect))
    assert ran == [1]
    assert (outcome.status, outcome.reason) == (status, "RESULT_NOT_JSON")


async def test_unknown_tool_is_refused_before_dispatch(redact_message: Any) -> None:
    outcome = await make(redact_message).execute(request("demo.missing", {}))
    assert (outcome.status, outcome.reason, outcome.dispatched) == (
        "failed",
        "TOOL_NOT_FOUND",
        False,
    )


async def test_arguments_that_do_not_fit_are_refused_before_dispatch(redact_message: Any) -> None:
    calls = []

    def add(a: int, b: int) -> int:
        calls.append(1)
        return a + b

    outcome = await make(redact_message, add=add).execute(request("demo.add", {"a": 1, "c": 2}))
    assert (outcome.status, outcome.reason, outcome.dispatched) == (
        "failed",
        "ARGS_MISMATCH",
        False,
    )
    assert outcome.error is not None
    assert outcome.error.code is ErrorCode.INVALID_INPUT
    assert calls == []


async def test_import_failure_is_refused_before_dispatch_and_redacted(
    redact_message: Any, tmp_path: Path
) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('password=hunter2hunter2')\n")
    executor = PythonExecutor(
        redact_message=redact_message, root=tmp_path, entrypoints={"demo.x": "broken.py:x"}
    )
    outcome = await executor.execute(request("demo.x", {}))
    assert (outcome.status, outcome.reason, outcome.dispatched) == (
        "failed",
        "TOOL_IMPORT_FAILED",
        False,
    )
    assert outcome.error is not None
    assert "hunter2hunter2" not in outcome.error.message


async def test_caller_cancellation_sets_the_flag_and_propagates(redact_message: Any) -> None:
    async def slow() -> None:
        await anyio.sleep(30)

    req = request("demo.slow", {})
    with anyio.move_on_after(0.05):
        await make(redact_message, slow=slow).execute(req)
    assert req.context.is_cancelled


async def test_argument_names_are_bound_once_per_set(redact_message: Any) -> None:
    """The signature check is remembered per set of argument names; each set is still
    checked, and a set that does not fit stays refused."""

    def add(a: int, b: int = 0) -> int:
        return a + b

    executor = make(redact_message, add=add)
    for args in ({"a": 1, "b": 2}, {"a": 5, "b": 6}, {"a": 3}, {"b": 1}, {"b": 2}, {"a": 1}):
        outcome = await executor.execute(request("demo.add", args))
        if "a" in args:
            assert (outcome.status, outcome.result) == ("succeeded", args["a"] + args.get("b", 0))
        else:
            assert (outcome.status, outcome.reason) == ("failed", "ARGS_MISMATCH")
    tool = executor._tools.cached("demo.add")
    assert tool is not None
    assert tool._fits == {frozenset("ab"): True, frozenset("a"): True, frozenset("b"): False}


async def test_binding_cache_is_bounded(redact_message: Any) -> None:
    from charter.executors.python import MAX_CACHED_BINDINGS

    def anything(**kwargs: Any) -> int:
        return len(kwargs)

    executor = make(redact_message, anything=anything)
    for i in range(MAX_CACHED_BINDINGS + 10):
        outcome = await executor.execute(request("demo.anything", {f"k{i}": i}))
        assert (outcome.status, outcome.result) == ("succeeded", 1)
    tool = executor._tools.cached("demo.anything")
    assert tool is not None
    assert len(tool._fits) == MAX_CACHED_BINDINGS
