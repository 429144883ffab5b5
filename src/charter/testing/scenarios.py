"""Recorded scenarios: small, realistic runs for tests, golden ledgers and benchmarks.

They use only the run, task, handoff and artifact events (and observational ``task_progress``
and ``tool_call_recorded``), so they stay valid as the kernel's call projections evolve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.ledger.events import NewEvent
from charter.ledger.ports import EventLog


def ev(type_: str, **payload: Any) -> NewEvent:
    return NewEvent(type=type_, payload=payload)


def failure(
    code: str = "transient_external", message: str = "upstream unavailable"
) -> dict[str, Any]:
    return {"code": code, "message": message, "retryable": True, "details": {}}


def run_created(session_id: str = "session-1", workflow_slug: str = "report-pipeline") -> NewEvent:
    return ev(
        "run_created",
        session_id=session_id,
        workflow_slug=workflow_slug,
        workflow={"version": "1.0.0", "sha256": "sha256:" + "ab" * 32},
    )


def artifact(artifact_id: str, path: str, *, task_id: str = "retrieve") -> Mapping[str, Any]:
    return {
        "artifact_id": artifact_id,
        "path": path,
        "sha256": "sha256:" + "cd" * 32,
        "media_type": "text/csv",
        "size": 1234,
        "producer": {"task_id": task_id, "tool_id": "chembl.fetch", "call_id": "call-1"},
        "trust": "internal",
    }


SAMPLE_RUN: tuple[NewEvent, ...] = (
    run_created(),
    ev("run_status_changed", status="planning"),
    ev("task_created", task_id="retrieve", role="retriever", profile="chembl-retrieval"),
    ev(
        "task_created",
        task_id="report",
        role="writer",
        profile="reporting",
        depends_on=["retrieve"],
    ),
    ev("run_status_changed", status="running"),
    ev(
        "handoff_recorded",
        task_id="retrieve",
        handoff_id="handoff-1",
        objective="fetch actives",
        acceptance_criteria=["csv with ids"],
    ),
    ev("task_status_changed", task_id="retrieve", status="running"),
    ev("task_progress", task_id="retrieve", message="fetching", percent=10),
    ev("task_progress", task_id="retrieve", message="fetched", percent=100),
    ev("artifact_registered", **artifact("actives-1", "data/actives.csv")),
    ev(
        "tool_call_recorded",
        call_id="call-1",
        tool_id="chembl.fetch",
        status="succeeded",
        args_fingerprint="hmac-sha256:test:" + "00" * 32,
    ),
    ev("task_status_changed", task_id="retrieve", status="completed"),
    ev("handoff_recorded", task_id="report", handoff_id="handoff-2", objective="write report"),
    ev("task_status_changed", task_id="report", status="running"),
    ev("task_progress", task_id="report", message="drafting"),
    ev("task_status_changed", task_id="report", status="failed", error=failure()),
    ev("handoff_recorded", task_id="report", handoff_id="handoff-3", objective="retry report"),
    ev("task_status_changed", task_id="report", status="running"),
    ev("run_status_changed", status="input_required"),
    ev("run_status_changed", status="running"),
    ev("task_status_changed", task_id="report", status="completed"),
    ev("run_status_changed", status="completed"),
)
"""A catalog run with two tasks, a retry, an artifact and a human-input pause."""


async def record_sample_run(log: EventLog, run_id: str) -> None:
    """Append :data:`SAMPLE_RUN` one event at a time (as a live runtime would)."""
    for entry in SAMPLE_RUN:
        await log.append(run_id, [entry])
