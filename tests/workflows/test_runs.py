"""Runs with tasks: pinned contracts, start and completion rules, partial runs with gaps."""

from __future__ import annotations

from typing import Any

import pytest

from charter.artifacts.records import Producer, Trust
from charter.errors import InvalidInput
from charter.ledger.views import RunRow
from charter.project.build import build_project
from charter.workflows.service import RunInput, WorkflowRuns
from tests.workflows._project import workflow, write_catalog_project
from tests.workflows.conftest import Env

pytestmark = pytest.mark.anyio

ROLES = {"retrieve": "retriever", "analyse": "analyst", "report": "writer"}


def handoff_for(env: Env, run: RunRow, task_id: str, inputs: list[str]) -> dict[str, Any]:
    contract = WorkflowRuns.contract(run, task_id)
    return {
        "objective": f"do {task_id}",
        "sender_role": "coordinator",
        "receiver_role": contract.role,
        "constraints": ["stay inside the run"],
        "acceptance_criteria": list(contract.acceptance_criteria),
        "input_artifact_ids": inputs,
        "expected_outputs": list(contract.output_artifacts),
        "capabilities": list(contract.required_tools),
        "budget": {"max_tokens": 1000, "max_tool_calls": 3, "timeout_seconds": 60},
    }


async def produce(env: Env, run_id: str, task_id: str, typ: str, body: bytes) -> str:
    stored = await env.artifacts.write_bytes(run_id, f"{task_id}/{typ}.txt", body)
    record = await env.artifacts.register(
        run_id,
        stored,
        type=typ,
        media_type="text/plain",
        producer=Producer(task_id=task_id, tool_id="t", call_id="c"),
        trust=Trust.INTERNAL,
    )
    return record.artifact_id


async def run_task(env: Env, run_id: str, task_id: str, inputs: list[str]) -> list[str]:
    run = await env.runs.run(run_id)
    await env.runs.record_handoff(run_id, task_id, handoff_for(env, run, task_id, inputs))
    await env.runs.start_task(run_id, task_id)
    out = []
    for typ in WorkflowRuns.contract(run, task_id).output_artifacts:
        out.append(await produce(env, run_id, task_id, typ, b"data"))
    await env.runs.complete_task(run_id, task_id)
    return out


async def test_a_run_completes_when_every_contract_is_satisfied(env: Env) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    run = await env.runs.run(run_id)
    assert run.status == "running"
    assert run.workflow["contract_sha256"].startswith("sha256:")
    assert set(run.workflow["entries"]) == {"pipeline", "csv-basics"}
    tasks = await env.runs.tasks(run_id)
    assert {t: r.role for t, r in tasks.items()} == ROLES
    dataset = await run_task(env, run_id, "retrieve", [])
    summary = await run_task(env, run_id, "analyse", dataset)
    await run_task(env, run_id, "report", summary)
    end = await env.runs.finish_run(run_id)
    assert (end.status, end.gaps) == ("completed", ())


async def test_a_run_missing_an_output_ends_partial_with_the_gap(env: Env) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    dataset = await run_task(env, run_id, "retrieve", [])
    await run_task(env, run_id, "analyse", dataset)
    end = await env.runs.finish_run(run_id)
    assert end.status == "partial"
    assert end.gaps == ("task report is pending", "output report is not registered")
    assert (await env.runs.run(run_id)).status == "partial"


async def test_the_pinned_contract_survives_catalog_edits(env: Env, tmp_path: Any) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    before = (await env.runs.run(run_id)).workflow
    edited = workflow(version="2.0.0", description="Edited.")
    write_catalog_project(env.root, wf=edited)
    env.runs.build = build_project(env.root)
    assert env.runs.build.document["catalog"]["workflows"]["pipeline"]["version"] == "2.0.0"
    after = (await env.runs.run(run_id)).workflow
    assert after == before
    assert after["version"] == "1.0.0"
    dataset = await run_task(env, run_id, "retrieve", [])
    assert dataset
    new_run = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    assert (await env.runs.run(new_run)).workflow["version"] == "2.0.0"


async def test_a_task_starts_only_when_its_rules_hold(env: Env) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    run = await env.runs.run(run_id)
    with pytest.raises(InvalidInput) as info:
        await env.runs.start_task(run_id, "retrieve")
    assert info.value.reason == "HANDOFF_MISSING"
    # dependencies not completed
    with pytest.raises(InvalidInput) as info:
        await env.runs.start_task(run_id, "analyse")
    assert info.value.reason == "TASK_DEPENDENCIES_OPEN"
    # inputs must resolve: analyse needs a dataset that does not exist yet
    with pytest.raises(InvalidInput) as info:
        await env.runs.record_handoff(run_id, "analyse", handoff_for(env, run, "analyse", []))
    assert info.value.reason == "HANDOFF_INPUT_UNRESOLVED"


async def test_a_task_completes_only_with_its_outputs(env: Env) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    run = await env.runs.run(run_id)
    await env.runs.record_handoff(run_id, "retrieve", handoff_for(env, run, "retrieve", []))
    await env.runs.start_task(run_id, "retrieve")
    with pytest.raises(InvalidInput) as info:
        await env.runs.complete_task(run_id, "retrieve")
    assert info.value.reason == "TASK_OUTPUTS_MISSING"
    assert info.value.details["missing"] == ["dataset"]


async def test_a_retry_needs_a_fresh_handoff(env: Env) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    run = await env.runs.run(run_id)
    await env.runs.record_handoff(run_id, "retrieve", handoff_for(env, run, "retrieve", []))
    await env.runs.start_task(run_id, "retrieve")
    await env.runs.fail_task(run_id, "retrieve", "upstream was down")
    with pytest.raises(InvalidInput) as info:
        await env.runs.start_task(run_id, "retrieve")
    assert info.value.reason == "HANDOFF_STALE"
    await env.runs.record_handoff(run_id, "retrieve", handoff_for(env, run, "retrieve", []))
    await env.runs.start_task(run_id, "retrieve")
    task = (await env.runs.tasks(run_id))["retrieve"]
    assert (task.status, task.attempts) == ("running", 2)


async def test_a_tampered_input_is_refused_at_start(env: Env) -> None:
    run_id = await env.runs.create_run("pipeline", principal="alice", tenant="acme")
    dataset = await run_task(env, run_id, "retrieve", [])
    run = await env.runs.run(run_id)
    await env.runs.record_handoff(run_id, "analyse", handoff_for(env, run, "analyse", dataset))
    rows = await env.runs.artifact_rows(run_id)
    path = env.artifacts.store.root / run_id / rows[0].path  # type: ignore[attr-defined]
    path.chmod(0o644)
    path.write_bytes(b"tampered")
    with pytest.raises(Exception) as info:
        await env.runs.start_task(run_id, "analyse")
    assert "INTEGRITY" in getattr(info.value, "reason", "")


async def test_inputs_at_run_creation_must_match_the_workflow(env: Env) -> None:
    inputs = [RunInput(type="dataset", path="in.csv", data=b"a\n")]
    with pytest.raises(InvalidInput) as info:
        await env.runs.create_run("pipeline", principal="alice", tenant="acme", inputs=inputs)
    assert info.value.reason == "RUN_INPUTS_MISMATCH"
