"""``charter demo report-pipeline``: a catalog workflow run end to end by a scripted caller.

The script plays the coordinator and the three agents of the example's ``quarterly-report``
workflow: it creates the run (pinned contract, three tasks), and for each task in DAG order
records a handoff naming the input artifact ids, starts the task, resolves a context for the
task's role (agent) and profile in the run, makes the task's tool call with ``task_id`` (the
kernel enforces the task's role, profile, tools and budgets), completes the task once its
output is registered, and finally finishes the run and verifies its ledger and artifacts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from charter.cli._output import console, print_step, print_table
from charter.errors import Failure
from charter.kernel.envelope import Envelope
from charter.ledger.verify import verify_run
from charter.ledger.views import RunRow
from charter.project.build import build_project, save_build
from charter.runtime import Runtime, ledger_key_for, open_runtime
from charter.workflows.service import WorkflowRuns

WORKFLOW = "quarterly-report"
COORDINATOR = "coordinator"


def call_arguments(task_id: str, inputs: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The scripted caller: which tool each task calls, with which arguments."""
    if task_id == "retrieve":
        return "data.fetch", {"name": "sales"}
    if task_id == "analyse":
        return "stats.summarise", {"dataset": inputs["dataset"]}
    if task_id == "report":
        return "report.write", {"summary": inputs["summary"], "title": "Quarterly sales"}
    raise KeyError(task_id)


@dataclass
class PipelineResult:
    run_id: str
    status: str
    gaps: tuple[str, ...]
    artifacts: dict[str, str] = field(default_factory=dict)  # type -> artifact id
    envelopes: dict[str, Envelope] = field(default_factory=dict)  # task -> its call


def handoff_for(run: RunRow, task_id: str, inputs: list[str]) -> dict[str, Any]:
    contract = WorkflowRuns.contract(run, task_id)
    return {
        "objective": contract.title or task_id,
        "sender_role": COORDINATOR,
        "receiver_role": contract.role,
        "constraints": ["use only the artifacts named here"],
        "acceptance_criteria": list(contract.acceptance_criteria),
        "input_artifact_ids": inputs,
        "expected_outputs": list(contract.output_artifacts),
        "capabilities": list(contract.required_tools),
        "budget": {"max_tokens": 4000, "max_tool_calls": 2, "timeout_seconds": 300},
    }


async def run_report_pipeline(
    rt: Runtime,
    *,
    operator: str = "alice",
    caller: str = "app",
    skip_calls: Collection[str] = (),
    say: Callable[[str], None] = lambda _: None,
) -> PipelineResult:
    """Run ``quarterly-report`` with the scripted caller; ``skip_calls`` names tasks whose
    tool call is left out (the task then fails and the run ends ``partial``)."""
    runs = WorkflowRuns(build=rt.build, store=rt.store, artifacts=rt.artifacts)
    who = rt.principal(operator)
    run_id = await runs.create_run(WORKFLOW, principal=who.name, tenant=who.tenant)
    run = await runs.run(run_id)
    pinned = run.workflow
    say(f"run {run_id}: {WORKFLOW} {pinned['version']} pinned as {pinned['contract_sha256']}")
    result = PipelineResult(run_id=run_id, status="running", gaps=())
    order = [t.id for t in WorkflowRuns.contract_tasks(run)]
    for task_id in order:
        contract = WorkflowRuns.contract(run, task_id)
        inputs = [result.artifacts[t] for t in contract.input_artifacts if t in result.artifacts]
        if len(inputs) != len(contract.input_artifacts):
            say(f"task {task_id}: its inputs are missing; not started")
            continue
        await runs.record_handoff(run_id, task_id, handoff_for(run, task_id, inputs))
        await runs.start_task(run_id, task_id)
        ctx = await rt.resolve_context(
            caller, contract.profile, agent=contract.role, run_id=run_id, objective=task_id
        )
        if task_id not in skip_calls:
            named = dict(zip(contract.input_artifacts, inputs, strict=True))
            tool, arguments = call_arguments(task_id, named)
            env = await rt.call(
                ctx.context_id,
                tool,
                f"{task_id}-1",
                arguments,
                as_=caller,
                task_id=task_id,
            )
            result.envelopes[task_id] = env
            say(f"task {task_id} ({contract.role}): {tool} → {env.status.value}")
        try:
            await runs.complete_task(run_id, task_id)
        except Failure as exc:
            await runs.fail_task(run_id, task_id, str(exc))
            say(f"task {task_id}: failed — {exc}")
            continue
        for row in await runs.artifact_rows(run_id):
            if row.producer.get("task_id") == task_id and row.type is not None:
                result.artifacts[row.type] = row.artifact_id
        say(f"task {task_id}: completed")
    end = await runs.finish_run(run_id)
    result.status, result.gaps = end.status, end.gaps
    return result


async def report_pipeline_demo(directory: Path) -> bool:
    b = build_project(directory)
    save_build(b, directory)
    workflows = ", ".join((b.document.get("catalog") or {}).get("workflows", {}))
    print_step("Build", f" {b.digest} (workflows: {workflows})")
    async with open_runtime(directory) as rt:
        result = await run_report_pipeline(
            rt, say=lambda line: console.print(f"• {line}", markup=False)
        )
        table = Table(title=f"artifacts of {escape(result.run_id)}")
        for col in ("type", "artifact", "media type", "path", "producer"):
            table.add_column(col)
        for row in await rt.artifact_rows(result.run_id):
            await rt.artifacts.verify(result.run_id, row.artifact_id)
            cells = (
                row.type,
                row.artifact_id,
                row.media_type,
                row.path,
                f"{row.producer.get('task_id')} / {row.producer.get('tool_id')}",
            )
            table.add_row(*(escape(str(cell)) for cell in cells))
        print_table(table)
        report_id = result.artifacts.get("report")
        if report_id is not None:
            rows = await rt.artifact_rows(result.run_id)
            found = next(r for r in rows if r.artifact_id == report_id)
            text = rt.artifacts.store.read_bytes(
                result.run_id, found.path, expected_sha256=found.sha256
            )
            console.print(text.decode("utf-8"), markup=False)  # the report as written
        report = await verify_run(rt.store, result.run_id, ledger_key_for(directory))
        print_step(
            "Run",
            f" {result.run_id}: {result.status}"
            + (f" (gaps: {json.dumps(list(result.gaps))})" if result.gaps else ""),
        )
        print_step(
            "Ledger",
            f" {'verified' if report.ok else 'FAILED ' + str(report.reason)} "
            f"({report.events} events); artifacts verified",
        )
        console.print(
            f"\nSee it: charter runs verify {result.run_id} (in {directory})", markup=False
        )
        return report.ok and result.status == "completed"
