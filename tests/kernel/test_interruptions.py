"""Cancellation is recorded, and ``Kernel.call`` never raises.

Before: a call cancelled after its intent stayed ``dispatching`` for good in a live process
(reconcile skips live owners, run status changes failed CALL_IN_FLIGHT, a retry waited for
timeout + 30 s and answered ``dispatching``); a non-``Failure`` exception from the executor,
the redactor or a sink escaped ``Kernel.call`` and, after the intent, left the call
``dispatching`` with no outcome and no audit.

The stores here are unit-test doubles around the real memory store: an append of a chosen
stage waits on a gate, so a cancellation lands exactly there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.authorize import Denial
from charter.kernel.envelope import CallStatus
from charter.kernel.executor_port import ExecutionOutcome, ExecutionRequest
from charter.kernel.redaction import Redactor
from charter.ledger.events import Event, NewEvent
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import APP, KEY, Env, make_kernel

pytestmark = pytest.mark.anyio


class GatedStore(MemoryStore):
    """A memory store whose append of a ``tool_progress`` ``stage`` waits for ``gate``."""

    def __init__(self, stage: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.stage = stage
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def append(
        self, run_id: str, entries: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> Sequence[Event]:
        if any(e.payload.get("stage") == self.stage for e in entries):
            self.reached.set()
            await self.gate.wait()
        return await super().append(run_id, entries, expected_seq=expected_seq)


@pytest.fixture(autouse=True, params=["task", "in_place"])
def _appends(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test twice: the shielded appends as tasks, and started in the caller's task
    (the store vouches for its append: charter.kernel.flight.in_place)."""
    if request.param == "in_place":
        monkeypatch.setattr(GatedStore, "append_in_place", GatedStore.append, raising=False)


def gated(project: Path, stage: str, **kw: Any) -> tuple[Any, GatedStore]:
    clock = FakeClock(step=timedelta(0))
    store = GatedStore(stage, key=KEY, clock=clock)
    return make_kernel(project, store, clock, **kw), store


def recorded(store: Any, run_id: str) -> list[dict[str, Any]]:
    return [
        json.loads(r.data)["payload"]
        for r in store.events.values()
        if r.run_id == run_id and r.type == "tool_call_recorded"
    ]


async def cancel_at(kernel: Any, store: GatedStore, tool: str, args: Any) -> tuple[str, str]:
    ctx = await kernel.resolve_context(APP, "all")
    task = asyncio.create_task(kernel.call(ctx.context_id, tool, "c1", args, principal=APP))
    await store.reached.wait()
    task.cancel()
    await asyncio.sleep(0)
    store.gate.set()  # the shielded append goes on
    with pytest.raises(asyncio.CancelledError):
        await task
    return ctx.context_id, ctx.run_id


async def test_cancelled_while_the_intent_is_appended_is_cancelled_and_ran_nothing(
    project: Path,
) -> None:
    kernel, store = gated(project, "started")
    cid, run_id = await cancel_at(kernel, store, "kv.get", {"key": "a"})
    row = await kernel.get_call(cid, "c1", "acme")
    assert row is not None
    assert row.state == "cancelled"
    assert row.receipt["error"]["reason"] == "CALL_CANCELLED"
    assert not (project / "journal.txt").exists()  # the tool never ran
    assert recorded(store, run_id)[-1]["outcome"] == "cancelled"


async def test_cancelled_while_the_outcome_is_appended_keeps_the_real_outcome(
    project: Path,
) -> None:
    kernel, store = gated(project, "completed")
    cid, _ = await cancel_at(kernel, store, "kv.get", {"key": "a"})
    row = await kernel.get_call(cid, "c1", "acme")
    assert row is not None
    assert row.state == "succeeded"
    assert row.receipt["data"] == {"key": "a", "value": None}


async def test_cancelled_while_the_tool_runs_is_unknown_and_never_dispatching(
    env: Env,
) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    task = asyncio.create_task(
        env.kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.5}, principal=APP)
    )
    while env.runs_of("kv.slow") == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    row = await env.kernel.get_call(ctx.context_id, "s1", "acme")
    assert row is not None
    assert row.state == "unknown"
    assert row.receipt["error"]["reason"] == "CALL_CANCELLED"
    # a retry answers the receipt at once instead of waiting for a live owner
    again = await env.kernel.call(ctx.context_id, "kv.slow", "s1", {"seconds": 0.5}, principal=APP)
    assert again.status is CallStatus.UNKNOWN
    assert again.metrics.cached is True
    assert env.runs_of("kv.slow") == 1


async def test_cancelled_before_the_intent_is_audited_and_reserves_nothing(
    project: Path,
) -> None:
    kernel, store = gated(project, "never")

    # the summary, before the intent
    def cancelled(contract: Any, arguments: Any, redactor: Any = None, **_: Any) -> Any:
        raise asyncio.CancelledError

    kernel.state.summary = cancelled
    ctx = await kernel.resolve_context(APP, "all")
    with pytest.raises(asyncio.CancelledError):
        await kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert await kernel.get_call(ctx.context_id, "c1", "acme") is None
    assert recorded(store, ctx.run_id)[-1]["outcome"] == "cancelled"


# ---------------------------------------------------------------------------------------
# never raises


class _Broken(Redactor):
    """A redactor whose ``redact`` raises (what a bug in a deployment's redaction does)."""

    def __init__(self, fail: Any) -> None:
        super().__init__()
        self._fail = fail

    def redact(self, value: Any) -> Any:
        return self._fail(value)


class Exploding:
    kind = "python"

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        raise RuntimeError("executor bug")

    async def aclose(self) -> None:
        return None


async def test_an_executor_that_raises_leaves_an_audited_unknown(env: Env) -> None:
    env.kernel.executors["python"] = Exploding()  # type: ignore[assignment]
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", "b1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.UNKNOWN, out
    assert out.error is not None
    assert (out.error["code"], out.error["reason"]) == ("internal", "INTERNAL_ERROR")
    assert "executor bug" not in out.error["message"]  # the type, never the text
    row = await env.kernel.get_call(ctx.context_id, "b1", "acme")
    assert row is not None
    assert row.state == "unknown"
    audit = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert (audit[-1]["outcome"], audit[-1]["code"], audit[-1]["reason"]) == (
        "unknown",
        "internal",
        "INTERNAL_ERROR",
    )


async def test_a_redactor_that_raises_before_the_intent_is_an_audited_internal(
    env: Env,
) -> None:
    def broken(value: Any) -> Any:
        raise ValueError("redactor bug")

    env.kernel.state._redactors[env.build.tools["kv.get"].contract.digest] = _Broken(broken)
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", "r1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.FAILED
    assert out.error is not None
    assert (out.error["code"], out.error["reason"]) == ("internal", "INTERNAL_ERROR")
    assert await env.kernel.get_call(ctx.context_id, "r1", "acme") is None  # nothing reserved
    audit = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert (audit[-1]["outcome"], audit[-1]["reason"]) == ("failed", "INTERNAL_ERROR")


async def test_a_raising_ownership_hook_denies_and_is_audited(
    project: Path, tmp_path: Path
) -> None:
    def hook(inp: Any) -> Denial | None:
        raise RuntimeError("hook bug")

    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock, ownership_hooks=[hook])
    ctx = await kernel.resolve_context(APP, "all")
    out = await kernel.call(ctx.context_id, "kv.get", "h1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert (out.error["code"], out.error["reason"]) == ("internal", "POLICY_ERROR")
    assert "RuntimeError" in out.error["message"]
    assert "hook bug" not in out.error["message"]
    assert recorded(store, ctx.run_id)[-1]["reason"] == "POLICY_ERROR"


async def test_a_raising_audit_sink_does_not_change_the_answer(env: Env) -> None:
    class Sink:
        async def record(self, record: Any) -> None:
            raise OSError("disk full")

    env.kernel.audit = Sink()
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", "a1", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.SUCCEEDED, out
    row = await env.kernel.get_call(ctx.context_id, "a1", "acme")
    assert row is not None
    assert row.state == "succeeded"
