"""Task start / completion and run completion rules, as pure functions over the typed views
of the run, task and artifact rows (:mod:`charter.ledger.views`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from charter.errors import InvalidInput
from charter.ledger.views import ArtifactRow, RunRow, TaskRow
from charter.project.catalog import TaskContract


def current_handoff(task: TaskRow) -> Mapping[str, Any] | None:
    """The handoff bound to the attempt the task is in (running) or would start next."""
    attempt = task.attempts + (0 if task.status in ("running", "input_required") else 1)
    found = [h for h in task.handoffs if h.get("attempt") == attempt]
    return found[-1] if found else None


def next_handoff(task: TaskRow) -> Mapping[str, Any] | None:
    """The handoff recorded for the task's next attempt, if any."""
    attempt = task.attempts + 1
    found = [h for h in task.handoffs if h.get("attempt") == attempt]
    return found[-1] if found else None


def check_start(run: RunRow, task: TaskRow, tasks: Mapping[str, TaskRow]) -> Mapping[str, Any]:
    """Raise unless ``task`` may enter ``running`` now; returns the attempt's handoff."""
    tid = task.task_id
    if run.status != "running":
        raise InvalidInput(f"the run is {run.status}, not running", reason="RUN_NOT_RUNNING")
    if task.status not in ("pending", "failed", "input_required"):
        raise InvalidInput(f"task {tid} is {task.status}", reason="ILLEGAL_TRANSITION")
    waiting = [d for d in task.depends_on if tasks[d].status != "completed"]
    if waiting:
        statuses = {d: tasks[d].status for d in waiting}
        ended = [d for d in waiting if statuses[d] in ("skipped", "cancelled")]
        said = ", ".join(f"{d} ({statuses[d]})" for d in waiting)
        message = f"task {tid} waits for {said}"
        if ended:  # a skipped or cancelled task never completes: say so, not just "waits"
            message = (
                f"task {tid} cannot start: its dependency "
                + ", ".join(f"{d} was {statuses[d]}" for d in ended)
                + " and will never complete"
            )
        raise InvalidInput(
            message,
            reason="TASK_DEPENDENCIES_OPEN",
            details={"waiting": waiting, "statuses": statuses},
        )
    # Resuming from input_required starts a new attempt: it needs a handoff recorded for
    # that attempt, never the one the interrupted attempt started with.
    handoff = next_handoff(task) if task.status == "input_required" else current_handoff(task)
    if handoff is None:
        reason = "HANDOFF_STALE" if task.handoffs else "HANDOFF_MISSING"
        raise InvalidInput(
            f"task {tid} needs a fresh handoff for attempt {task.attempts + 1}",
            reason=reason,
        )
    return handoff


def missing_outputs(
    contract: TaskContract, artifacts: Sequence[ArtifactRow], *, task_id: str
) -> list[str]:
    produced = {a.type for a in artifacts if a.producer.get("task_id") == task_id}
    return [o for o in contract.output_artifacts if o not in produced]


def check_complete(contract: TaskContract, task: TaskRow, artifacts: Sequence[ArtifactRow]) -> None:
    if task.status != "running":
        raise InvalidInput(f"task {task.task_id} is {task.status}", reason="TASK_NOT_RUNNING")
    missing = missing_outputs(contract, artifacts, task_id=task.task_id)
    if missing:
        raise InvalidInput(
            f"task {task.task_id} has not registered {', '.join(missing)}",
            reason="TASK_OUTPUTS_MISSING",
            details={"missing": missing},
        )


def run_gaps(
    workflow: Mapping[str, Any], tasks: Mapping[str, TaskRow], artifacts: Sequence[ArtifactRow]
) -> list[str]:
    """What keeps a run from ``completed``: unfinished tasks and missing outputs."""
    gaps: list[str] = []
    for t in workflow.get("tasks", []):
        row = tasks.get(t["id"])
        if row is None or row.status != "completed":
            status = row.status if row else "missing"
            gaps.append(f"task {t['id']} is {status}")
    types = {a.type for a in artifacts}
    for out in workflow.get("output_artifacts", []):
        if out not in types:
            gaps.append(f"output {out} is not registered")
    return gaps
