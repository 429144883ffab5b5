"""Operators cancel, fail or skip tasks (the seed's transitions), and resuming a task from
``input_required`` needs a fresh handoff.

Before: tasks could not be cancelled or skipped at all, and a task resumed from
``input_required`` silently reused the handoff of the attempt that was interrupted.
"""

from __future__ import annotations

import pytest

from charter.contracts.canonical import Fingerprinter
from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.endings import RunEndings
from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.redaction import Redactor
from charter.ledger.events import NewEvent
from charter.workflows.service import WorkflowRuns
from tests.workflows.conftest import Env
from tests.workflows.test_runs import handoff_for

pytestmark = pytest.mark.anyio

ALICE = Principal(name="alice", tenant="acme", kind=PrincipalKind.OPERATOR, permissions=frozenset())
APP = Principal(name="app", tenant="acme", kind=PrincipalKind.APPLICATION, permissions=frozenset())
EVE = Principal(name="eve", tenant="globex", kind=PrincipalKind.OPERATOR, permissions=frozenset())


def endings(env: Env) -> RunEndings:
    return RunEndings(
        store=env.store,  # type: ignore[arg-type]
        redactor=Redactor(),
        fingerprinter=Fingerprinter("fp-test", b"f" * 32),
        settle_s=0.1,
    )


async def started(env: Env) -> str:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    run = await env.runs.run(run_id)
    await env.runs.record_handoff(run_id, "retrieve", handoff_for(env, run, "retrieve", []))
    await env.runs.start_task(run_id, "retrieve")
    return run_id


async def test_fail_cancel_and_skip_follow_the_task_lifecycle(env: Env) -> None:
    run_id = await started(env)
    ends = endings(env)
    failed = await ends.end_task(run_id, "retrieve", "failed", reason="bad source", operator=ALICE)
    assert failed["status"] == "failed"
    assert failed["error"]["message"] == "an operator failed it: bad source"
    skipped = await ends.end_task(run_id, "report", "skipped", reason="not needed", operator=ALICE)
    assert skipped["status"] == "skipped"
    cancelled = await ends.end_task(run_id, "analyse", "cancelled", reason="no", operator=ALICE)
    assert cancelled["status"] == "cancelled"
    with pytest.raises(InvalidInput) as illegal:  # a failed task is only left by a retry
        await ends.end_task(run_id, "retrieve", "skipped", reason="x", operator=ALICE)
    assert illegal.value.reason == "ILLEGAL_TRANSITION"
    tasks = await env.runs.tasks(run_id)
    assert {t: r.status for t, r in tasks.items()} == {
        "retrieve": "failed",
        "analyse": "cancelled",
        "report": "skipped",
    }
    end = await env.runs.finish_run(run_id)
    assert end.status == "partial"


async def test_a_running_task_cannot_be_skipped_and_only_operators_end_tasks(env: Env) -> None:
    run_id = await started(env)
    ends = endings(env)
    with pytest.raises(InvalidInput) as illegal:
        await ends.end_task(run_id, "retrieve", "skipped", reason="x", operator=ALICE)
    assert illegal.value.reason == "ILLEGAL_TRANSITION"
    with pytest.raises(PermissionDenied) as app:
        await ends.end_task(run_id, "retrieve", "cancelled", reason="x", operator=APP)
    assert app.value.reason == "ENDER_NOT_HUMAN"
    with pytest.raises(PermissionDenied) as other:
        await ends.end_task(run_id, "retrieve", "cancelled", reason="x", operator=EVE)
    assert other.value.reason == "RUN_NOT_FOUND"


async def test_ending_the_run_cancels_its_open_tasks(env: Env) -> None:
    run_id = await started(env)
    ended = await endings(env).end_run(run_id, "cancelled", reason="stop", operator=ALICE)
    assert ended["status"] == "cancelled"
    tasks = await env.runs.tasks(run_id)
    assert {r.status for r in tasks.values()} == {"cancelled"}


async def test_resuming_from_input_required_needs_a_fresh_handoff(env: Env) -> None:
    run_id = await started(env)
    await env.store.append(
        run_id,
        [
            NewEvent(
                type="task_status_changed",
                payload={"task_id": "retrieve", "status": "input_required"},
            )
        ],
    )
    with pytest.raises(InvalidInput) as stale:
        await env.runs.start_task(run_id, "retrieve")
    assert stale.value.reason == "HANDOFF_STALE"
    run = await env.runs.run(run_id)
    contract = WorkflowRuns.contract(run, "retrieve")
    assert contract.id == "retrieve"
    await env.runs.record_handoff(run_id, "retrieve", handoff_for(env, run, "retrieve", []))
    await env.runs.start_task(run_id, "retrieve")
    tasks = await env.runs.tasks(run_id)
    assert tasks["retrieve"].status == "running"
    assert tasks["retrieve"].attempts == 2
