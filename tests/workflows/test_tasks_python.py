"""Tasks from Python: ``Runtime.workflows`` drives the report pipeline, ``Runtime.call`` names
the task, and the same refusals hold as on the other surfaces (TASK_REQUIRED, the task's
role, its allowlist, who may drive a run, tenancy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from charter.cli.pipeline_demo import call_arguments
from charter.errors import PermissionDenied
from charter.kernel.envelope import Envelope
from charter.runtime import Runtime, ledger_key_for
from charter.workflows.control import handoff_template
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def reason(env: Envelope) -> str | None:
    return (env.error or {}).get("reason")


async def _inputs(rt: Runtime, run_id: str) -> dict[str, str]:
    return {a.type: a.artifact_id for a in await rt.artifact_rows(run_id) if a.type}


async def test_the_pipeline_through_the_runtime_with_every_refusal(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        flow = rt.workflows
        run_id = await flow.create_run("quarterly-report", as_="alice")
        listed = await flow.tasks(run_id, as_="app")  # any principal of the tenant reads
        assert [(t["task_id"], t["status"]) for t in listed] == [
            ("retrieve", "pending"),
            ("analyse", "pending"),
            ("report", "pending"),
        ]
        assert listed[0]["contract"]["required_tools"] == ["data.fetch"]
        # another tenant sees no such run; the application may not drive the operator's run
        with pytest.raises(PermissionDenied) as hidden:
            await flow.tasks(run_id, as_="intruder")
        assert hidden.value.reason == "RUN_NOT_FOUND"
        h = handoff_template(listed[0], sender_role="coordinator", inputs={})
        for step in (
            flow.record_handoff(run_id, "retrieve", h, as_="app"),
            flow.start_task(run_id, "retrieve", as_="app"),
            flow.finish_run(run_id, as_="app"),
        ):
            with pytest.raises(PermissionDenied) as denied:
                await step
            assert denied.value.reason == "RUN_CONTROL_DENIED"

        # a call into the catalog run that names no task is refused, whatever the context
        ctx = await rt.resolve_context("app", "retrieval", agent="retriever", run_id=run_id)
        env = await rt.call(ctx.context_id, "data.fetch", "no-task", {"name": "sales"}, as_="app")
        assert (env.status.value, reason(env)) == ("denied", "TASK_REQUIRED")
        assert (await rt.artifact_rows(run_id)) == []  # nothing ran, nothing registered

        for task in listed:
            tid, contract = task["task_id"], task["contract"]
            inputs = await _inputs(rt, run_id)
            h = handoff_template(task, sender_role="coordinator", inputs=inputs, max_tool_calls=2)
            recorded = await flow.record_handoff(run_id, tid, h, as_="alice")
            assert recorded["handoff_id"].startswith("handoff-")
            assert (await flow.start_task(run_id, tid, as_="alice"))["status"] == "running"
            ctx = await rt.resolve_context(
                "app", contract["profile"], agent=contract["role"], run_id=run_id
            )
            named = {t: inputs[t] for t in contract["input_artifacts"]}
            tool, args = call_arguments(tid, named)
            if tid == "retrieve":
                # the wrong role: a context without the task's agent
                other = await rt.resolve_context("app", "retrieval", run_id=run_id)
                env = await rt.call(other.context_id, tool, "role", args, as_="app", task_id=tid)
                assert reason(env) == "TASK_ROLE_MISMATCH"
                # outside the allowlist: the task's context does not even offer the tool
                env = await rt.call(
                    ctx.context_id,
                    "stats.summarise",
                    "allow",
                    {"dataset": "artifact-000000000000"},
                    as_="app",
                    task_id=tid,
                )
                assert env.status.value == "denied"
                assert reason(env) in ("TOOL_NOT_DISCLOSED", "AGENT_SCOPE")
            env = await rt.call(ctx.context_id, tool, f"{tid}-1", args, as_="app", task_id=tid)
            assert env.status.value == "succeeded", env.error
            assert (await flow.complete_task(run_id, tid, as_="alice"))["status"] == "completed"
        end = await flow.finish_run(run_id, as_="alice")
        assert end == {"run_id": run_id, "status": "completed", "gaps": []}
        report = await rt.verify(run_id, ledger_key_for(root))
        assert report.ok, report.reason
        types = {a.type: a.producer.get("task_id") for a in await rt.artifact_rows(run_id)}
        assert types == {"dataset": "retrieve", "summary": "analyse", "report": "report"}


async def test_the_run_owner_drives_its_own_run_and_operators_end_tasks(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        flow = rt.workflows
        run_id = await flow.create_run("quarterly-report", as_="app")  # the app owns it
        tasks: list[dict[str, Any]] = await flow.tasks(run_id, as_="app")
        h = handoff_template(tasks[0], sender_role="coordinator", inputs={})
        await flow.record_handoff(run_id, "retrieve", h, as_="app")
        assert (await flow.start_task(run_id, "retrieve", as_="app"))["status"] == "running"
        with pytest.raises(PermissionDenied) as human:  # ending a task is an operator's act
            await flow.end_task(run_id, "retrieve", "fail", reason="x", as_="app")
        assert human.value.reason == "ENDER_NOT_HUMAN"
        failed = await flow.end_task(run_id, "retrieve", "fail", reason="bad", as_="alice")
        assert failed["status"] == "failed"
        end = await flow.finish_run(run_id, as_="app")
        assert end["status"] == "partial"
        assert "task retrieve is failed" in end["gaps"]
