"""Concurrent work in one run: approved writes resubmitted at once all reach their outcome.

Before: an approved call's intent decided *before* its append that it would move the run
``input_required → running`` (it consumed the last approval). Several approved calls of one
run resubmitted at once all decided so; the first append won and the others failed
``invalid_input`` / ``ILLEGAL_TRANSITION`` ("a run cannot go from running to running"),
unrecorded. Now the loser decides again. Counted by the tool's own journal.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.kernel.envelope import CallStatus
from charter.runtime import ledger_key_for, open_runtime
from tests.kernel._project import write_runtime_project
from tests.kernel.conftest import ALICE, APP, Env

pytestmark = pytest.mark.anyio

WRITES = 20


async def test_twenty_concurrent_approved_writes_all_succeed_once_each(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    args = {i: {"key": f"k{i}", "value": f"v{i}"} for i in range(WRITES)}
    for i in range(WRITES):
        out = await env.kernel.call(ctx.context_id, "kv.put", f"w{i}", args[i], principal=APP)
        assert out.status is CallStatus.PENDING_APPROVAL
        assert out.approval is not None
        await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
    answers = await asyncio.gather(
        *(
            env.kernel.call(ctx.context_id, "kv.put", f"w{i}", args[i], principal=APP)
            for i in range(WRITES)
        )
    )
    assert [a.status for a in answers] == [CallStatus.SUCCEEDED] * WRITES, [
        (a.call_id, a.status.value, a.error)
        for a in answers
        if a.status is not CallStatus.SUCCEEDED
    ]
    # executor-side: each write ran exactly once, under its own call id
    ran = Counter(line["call_id"] for line in env.journal() if line["tool"] == "kv.put")
    assert ran == Counter({f"w{i}": 1 for i in range(WRITES)})
    run = await env.store.get_row(_run(ctx.run_id))
    assert run is not None
    assert run["status"] == "running"
    # and every answer is in the ledger
    recorded = [
        json.loads(r.data)["payload"]
        for r in await env.store.read_stored(ctx.run_id)
        if r.type == "tool_call_recorded"
    ]
    assert Counter(p["outcome"] for p in recorded if p["tool_id"] == "kv.put") == Counter(
        {"succeeded": WRITES}
    )


async def test_concurrent_approved_and_unapproved_calls_in_one_run(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    writes = []
    for i in range(5):
        out = await env.kernel.call(
            ctx.context_id, "kv.put", f"w{i}", {"key": "k", "value": str(i)}, principal=APP
        )
        assert out.approval is not None
        await env.kernel.decide(out.approval["id"], approve=True, principal=ALICE)
        writes.append(
            env.kernel.call(
                ctx.context_id, "kv.put", f"w{i}", {"key": "k", "value": str(i)}, principal=APP
            )
        )
    # new writes asking for approval while approved ones resume the run, plus reads
    asks = [
        env.kernel.call(
            ctx.context_id, "kv.put", f"n{i}", {"key": "n", "value": str(i)}, principal=APP
        )
        for i in range(5)
    ]
    reads = [
        env.kernel.call(ctx.context_id, "kv.get", f"r{i}", {"key": "k"}, principal=APP)
        for i in range(5)
    ]
    answers = await asyncio.gather(*writes, *asks, *reads)
    statuses = Counter(a.status for a in answers)
    assert statuses == Counter({CallStatus.SUCCEEDED: 10, CallStatus.PENDING_APPROVAL: 5}), [
        (a.call_id, a.status.value, a.error) for a in answers
    ]
    run = await env.store.get_row(_run(ctx.run_id))
    assert run is not None
    assert run["status"] == "input_required"  # the five new requests wait


def _run(run_id: str):  # type: ignore[no-untyped-def]
    from charter.ledger.projections import run_key

    return run_key(run_id)


@pytest.fixture
def pg_store_url() -> Iterator[str]:
    from tests.stores.conftest import create_database, drop_database

    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


@pytest.mark.postgres
async def test_twenty_concurrent_approved_writes_on_postgresql(
    tmp_path: Path, pg_store_url: str
) -> None:
    """The same race over PostgreSQL, through ``open_runtime`` as a deployment opens it."""
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=pg_store_url) as rt:
        ctx = await rt.resolve_context("app", "all")
        args = {i: {"key": f"k{i}", "value": f"v{i}"} for i in range(WRITES)}
        for i in range(WRITES):
            out = await rt.call(ctx.context_id, "kv.put", f"w{i}", args[i], as_="app")
            assert out.status is CallStatus.PENDING_APPROVAL, out
            assert out.approval is not None
            await rt.approve(out.approval["id"], as_="alice")
        answers = await asyncio.gather(
            *(rt.call(ctx.context_id, "kv.put", f"w{i}", args[i], as_="app") for i in range(WRITES))
        )
        assert [a.status for a in answers] == [CallStatus.SUCCEEDED] * WRITES, [
            (a.call_id, a.status.value, a.error)
            for a in answers
            if a.status is not CallStatus.SUCCEEDED
        ]
        recorded = [
            json.loads(r.data)["payload"]
            for r in await rt.store.read_stored(ctx.run_id)
            if r.type == "tool_call_recorded"
        ]
        assert [p["outcome"] for p in recorded if p["tool_id"] == "kv.put"].count(
            "succeeded"
        ) == WRITES
        assert (await rt.verify(ctx.run_id, ledger_key_for(project))).ok
    journal = [json.loads(line) for line in (project / "journal.txt").read_text().splitlines()]
    ran = Counter(line["call_id"] for line in journal if line["tool"] == "kv.put")
    assert ran == Counter({f"w{i}": 1 for i in range(WRITES)})
