"""A delegating tool's calls are governed one by one and recorded as its children."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.contracts.decorator import declared_contract, tool
from charter.contracts.model import make_contract
from charter.errors import InvalidInput
from charter.kernel.delegation import tree
from charter.ledger.events import NewEvent
from charter.runtime import Runtime, ledger_key_for, open_runtime
from tests.delegation import holder
from tests.delegation._project import write_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield "sqlite:///.charter/charter.db"
        return
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


@pytest.fixture
async def rt(tmp_path: Path, store_url: str) -> AsyncIterator[Runtime]:
    project = write_project(tmp_path / "p")
    holder.GATES.clear()
    holder.SEEN.clear()
    async with open_runtime(project, store=store_url) as runtime:
        holder.RUNTIME[:] = [runtime]
        holder.SEEN["project"] = project
        yield runtime
    holder.RUNTIME.clear()


async def _events(rt: Runtime, run_id: str) -> list[Any]:
    return list(await rt.events(run_id))


def _started(events: list[Any], call_id: str) -> dict[str, Any]:
    return next(
        dict(e.payload)
        for e in events
        if e.type == "tool_progress"
        and e.payload.get("stage") == "started"
        and e.payload.get("call_id") == call_id
    )


def test_contract_declares_delegation_in_its_digest() -> None:
    base = {"id": "team.run", "description": "d"}
    plain, _ = make_contract(base)
    same, _ = make_contract({**base, "delegates_execution": False})
    delegating, _ = make_contract({**base, "delegates_execution": True})
    assert plain is not None
    assert same is not None
    assert delegating is not None
    assert plain.digest == same.digest  # the default keeps old digests
    assert delegating.digest != plain.digest
    assert delegating.canonical()["delegates_execution"] is True

    @tool("team.x", delegates_execution=True)
    def x() -> None:
        """A team."""

    assert declared_contract(x).delegates_execution is True
    assert (
        declared_contract(x).digest
        == make_contract({**dict(declared_contract(x).canonical())})[0].digest
    )  # type: ignore[union-attr]


def test_a_delegating_contract_declares_no_artifacts() -> None:
    contract, problems = make_contract(
        {
            "id": "team.files",
            "description": "d",
            "delegates_execution": True,
            "artifacts": {"writes": True},
        }
    )
    assert contract is None
    assert "delegates execution" in problems[0].message


async def test_inner_calls_are_governed_one_by_one_and_are_children(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    env = await rt.call(ctx.context_id, "team.run", "t1", {"keys": ["a", "b"]}, as_="app")
    assert env.status.value == "succeeded", env.error
    # reads ran, the write waits for a person, the undisclosed tool is denied
    assert env.data["statuses"] == ["succeeded", "succeeded", "pending_approval", "denied"]
    span = env.data["span"]
    assert span == env.trace["span_id"]

    parent = await rt.get_call(ctx.context_id, "t1", as_="app")
    assert parent.row["delegates_execution"] is True
    assert parent.row["span_id"] == span
    assert "parent_span_id" not in parent.row
    for child in ("t1.get0", "t1.get1"):
        row = await rt.get_call(ctx.context_id, child, as_="app")
        assert row.state == "succeeded"
        assert row.row["parent_span_id"] == span
        assert "delegates_execution" not in row.row

    events = await _events(rt, ctx.run_id)
    started = _started(events, "t1")
    assert started["delegates_execution"] is True
    assert started["span_id"] == span
    assert _started(events, "t1.get0")["parent_span_id"] == span
    audits = [
        dict(e.payload)
        for e in events
        if e.type == "tool_call_recorded" and str(e.payload["call_id"]).startswith("t1.")
    ]
    assert {a["call_id"]: a["outcome"] for a in audits} == {
        "t1.get0": "succeeded",
        "t1.get1": "succeeded",
        "t1.x": "denied",
    }
    assert all(a["parent_span_id"] == span for a in audits)
    requested = next(e.payload for e in events if e.type == "approval_requested")
    assert requested["call_id"] == "t1.put"
    assert requested["parent_span_id"] == span
    waiting = await rt.get_call(ctx.context_id, "t1.put", as_="app")
    assert waiting.state == "pending_approval"
    assert waiting.row["parent_span_id"] == span

    rows = await rt.store.query_rows("calls", {"run_id": ctx.run_id}, limit=100)
    children = tree(rows, span)
    assert [c["call_id"] for c in children] == ["t1.get0", "t1.get1", "t1.put"]
    by_column = await rt.store.query_rows(
        "calls", {"run_id": ctx.run_id, "parent_span_id": span}, limit=100
    )
    assert sorted(r["call_id"] for r in by_column) == ["t1.get0", "t1.get1", "t1.put"]
    # the ledger rebuilds the same rows from the events
    project = holder.SEEN["project"]
    report = await rt.verify(ctx.run_id, ledger_key_for(project, None, deployment=rt.deployment))
    assert report.ok, report


async def test_a_parent_must_be_a_running_delegating_call_of_the_run(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    forged = await rt.call(
        ctx.context_id, "kv.get", "f1", {"key": "a"}, as_="app", parent_span_id="span-nope"
    )
    assert forged.status.value == "denied"
    assert forged.error["reason"] == "DELEGATION_PARENT_UNKNOWN"
    # a plain call's span is no parent
    plain = await rt.call(ctx.context_id, "kv.get", "p1", {"key": "a"}, as_="app")
    child = await rt.call(
        ctx.context_id,
        "kv.get",
        "f2",
        {"key": "a"},
        as_="app",
        parent_span_id=plain.trace["span_id"],
    )
    assert child.error["reason"] == "DELEGATION_PARENT_UNKNOWN"
    # a finished delegating call's span is no parent either
    done = await rt.call(ctx.context_id, "team.run", "t2", {"keys": []}, as_="app")
    late = await rt.call(
        ctx.context_id,
        "kv.get",
        "f3",
        {"key": "a"},
        as_="app",
        parent_span_id=done.trace["span_id"],
    )
    assert late.error["reason"] == "DELEGATION_PARENT_UNKNOWN"
    bad = await rt.call(
        ctx.context_id, "kv.get", "f4", {"key": "a"}, as_="app", parent_span_id="a b\n"
    )
    assert bad.error["reason"] == "DELEGATION_PARENT_UNKNOWN"


async def test_run_transitions_watch_only_the_delegated_calls(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    call = asyncio.ensure_future(rt.call(ctx.context_id, "team.hold", "h1", {}, as_="app"))
    await asyncio.wait_for(holder.gate("started").wait(), 30)
    # the child kv.slow may still be in flight: wait until it is recorded
    for _ in range(3000):
        row = await rt.store.query_rows(
            "calls", {"run_id": ctx.run_id, "context_id": ctx.context_id, "call_id": "h1.slow"}
        )
        if row and row[0]["state"] != "dispatching":
            break
        await asyncio.sleep(0.01)
    # the delegating call is in flight, no delegated call is: the run may change status
    await rt.store.append(
        ctx.run_id,
        [NewEvent(type="run_status_changed", payload={"status": "input_required", "by": "t"})],
    )
    await rt.store.append(
        ctx.run_id,
        [NewEvent(type="run_status_changed", payload={"status": "running", "by": "t"})],
    )
    holder.gate("release").set()
    env = await call
    assert env.status.value == "succeeded"
    assert env.data == {"child": "succeeded"}


async def test_a_delegated_call_in_flight_holds_the_run(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    call = asyncio.ensure_future(rt.call(ctx.context_id, "team.hold", "h2", {}, as_="app"))
    await asyncio.wait_for(holder.gate("started").wait(), 30)
    # hold a slow child open by starting another one by hand, inside the span
    slow = asyncio.ensure_future(
        rt.call(
            ctx.context_id,
            "kv.slow",
            "h2.byhand",
            {"seconds": 1.0},
            as_="app",
            parent_span_id=holder.SEEN["span"],
        )
    )
    for _ in range(3000):
        rows = await rt.store.query_rows(
            "calls", {"run_id": ctx.run_id, "call_id": "h2.byhand"}, limit=5
        )
        if rows:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(InvalidInput) as info:
        await rt.store.append(
            ctx.run_id,
            [NewEvent(type="run_status_changed", payload={"status": "input_required"})],
        )
    assert info.value.reason == "CALL_IN_FLIGHT"
    assert "h2" not in info.value.details["call_ids"]
    assert "h2.byhand" in info.value.details["call_ids"]
    assert (await slow).status.value == "succeeded"
    holder.gate("release").set()
    assert (await call).status.value == "succeeded"
    row = await rt.get_call(ctx.context_id, "h2.byhand", as_="app")
    assert row.row["parent_span_id"] == holder.SEEN["span"]


async def test_a_delegating_write_takes_no_write_lock(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    pending = await rt.call(ctx.context_id, "team.write", "w1", {}, as_="app")
    assert pending.status.value == "pending_approval"
    await rt.approve(pending.approval["id"], as_="alice")
    env = await rt.call(
        ctx.context_id, "team.write", "w1", {}, as_="app", approval_id=pending.approval["id"]
    )
    assert env.status.value == "succeeded", env.error
    assert env.data == {"lock_free": True}


async def test_a_finished_childs_resubmission_gets_its_receipt(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    env = await rt.call(ctx.context_id, "team.run", "t3", {"keys": ["a"]}, as_="app")
    span = env.trace["span_id"]
    again = await rt.call(
        ctx.context_id, "kv.get", "t3.get0", {"key": "a"}, as_="app", parent_span_id=span
    )
    assert again.status.value == "succeeded"
    assert again.metrics.cached
    other = await rt.call(
        ctx.context_id, "kv.get", "t3.new", {"key": "a"}, as_="app", parent_span_id=span
    )
    assert other.error["reason"] == "DELEGATION_PARENT_UNKNOWN"


async def test_ending_the_run_abandons_a_delegating_call_in_flight(rt: Runtime) -> None:
    ctx = await rt.resolve_context("app", "all")
    call = asyncio.ensure_future(rt.call(ctx.context_id, "team.hold", "h4", {}, as_="app"))
    await asyncio.wait_for(holder.gate("started").wait(), 30)
    for _ in range(3000):  # its child finishes on its own
        rows = await rt.store.query_rows(
            "calls", {"run_id": ctx.run_id, "call_id": "h4.slow"}, limit=5
        )
        if rows and rows[0]["state"] != "dispatching":
            break
        await asyncio.sleep(0.01)
    ended = await rt.operations.end_run(ctx.run_id, "cancelled", reason="stop", as_="alice")
    assert ended["status"] == "cancelled"
    parent = await rt.get_call(ctx.context_id, "h4", as_="app")
    assert parent.state == "abandoned"
    assert parent.receipt is not None
    assert parent.receipt["error"]["reason"] == "ENDED_IN_FLIGHT"
    child = await rt.get_call(ctx.context_id, "h4.slow", as_="app")
    assert child.state == "succeeded"
    holder.gate("release").set()
    late = await call  # the tool's own answer comes too late to change the recorded end
    assert late.status.value == "abandoned"
