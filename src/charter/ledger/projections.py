"""Projections: rows derived from events, updated in the append's transaction, rebuildable.

Each projection row lives in one table under a key (:class:`RowKey`); a store keeps the row's
data as canonical JSON plus a few indexed columns (:data:`TABLES`). The effect of an event on
the rows is a pure function registered per event type (:data:`HANDLERS`): ``reads`` names the
rows it needs, ``apply`` returns the rows it writes. Backends fetch the reads inside the
transaction, call ``apply`` and write the result, so the same code updates SQLite, PostgreSQL,
memory and the in-memory rebuild that verification compares against.

Event types without a handler (observational ``tool_progress``, ``tool_call_recorded``,
``task_progress``; ``context_resolved``; the approval/proposal/chat families until their issues
add handlers and tables) read and write nothing: appending them touches only the event row and
the head. Later issues add tables to :data:`TABLES` and handlers to :data:`HANDLERS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from charter.errors import InvalidInput
from charter.ledger import calls_projection, lifecycle, proposals_projection
from charter.ledger.events import SCHEMA_VERSION, event_id
from charter.ledger.ids import check_identifier
from charter.ledger.rows import EventFacts as EventFacts
from charter.ledger.rows import Getter as Getter
from charter.ledger.rows import Handler as Handler
from charter.ledger.rows import Row as Row
from charter.ledger.rows import RowKey as RowKey
from charter.ledger.rows import TableSpec as TableSpec
from charter.ledger.rows import Writes as Writes
from charter.ledger.rows import new_row_key

TABLES: dict[str, TableSpec] = {
    "runs": TableSpec(
        name="runs",
        keys=("run_id",),
        columns=("status", "workflow_slug", "session_id", "created_at", "updated_at", "tenant"),
        order_by="created_at",
    ),
    "tasks": TableSpec(
        name="tasks", keys=("run_id", "task_id"), columns=("status", "seq"), order_by="seq"
    ),
    "artifacts": TableSpec(
        name="artifacts", keys=("run_id", "artifact_id"), columns=("seq",), order_by="seq"
    ),
}
RUN_TABLES: tuple[str, ...] = (
    "tasks",
    "artifacts",
    "contexts",
    "calls",
    "approvals",
    "run_calls",
    "proposals",
)
"""Tables whose rows belong to one run and are listed per run."""


def run_key(run_id: str) -> RowKey:
    return new_row_key(RowKey, ("runs", (run_id,)))


def task_key(run_id: str, task_id: str) -> RowKey:
    return new_row_key(RowKey, ("tasks", (run_id, task_id)))


def artifact_key(run_id: str, artifact_id: str) -> RowKey:
    return new_row_key(RowKey, ("artifacts", (run_id, artifact_id)))


def _bad(message: str, reason: str = "EVENT_PAYLOAD_INVALID") -> InvalidInput:
    return InvalidInput(message, reason=reason)


def _str_field(payload: Mapping[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str):
        raise _bad(f"payload field {name!r} must be a string")
    return value


def _opt_str(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is not None and not isinstance(value, str):
        raise _bad(f"payload field {name!r} must be a string")
    return value


def _open_run(event: EventFacts, get: Getter) -> Row:
    row = get(run_key(event.run_id))
    if row is None:
        raise _bad("the ledger does not start with run_created", "RUN_NOT_FOUND")
    lifecycle.ensure_run_open(lifecycle.parse_run_status(row["status"]))
    return row


def _touch(run: Row, event: EventFacts) -> Row:
    return {**run, "updated_at": event.at, "snapshot_seq": event.seq}


def _reads_run(run_id: str, payload: Mapping[str, Any]) -> tuple[RowKey, ...]:
    del payload
    return (run_key(run_id),)


def _reads_run_task(run_id: str, payload: Mapping[str, Any]) -> tuple[RowKey, ...]:
    task_id = payload.get("task_id")
    if not isinstance(task_id, str):
        return (run_key(run_id),)
    return (run_key(run_id), task_key(run_id, task_id))


def _reads_run_artifact(run_id: str, payload: Mapping[str, Any]) -> tuple[RowKey, ...]:
    artifact_id = payload.get("artifact_id")
    if not isinstance(artifact_id, str):
        return (run_key(run_id),)
    return (run_key(run_id), artifact_key(run_id, artifact_id))


# ---------------------------------------------------------------------------------------
# Handlers


def _run_created(event: EventFacts, get: Getter) -> Writes:
    if get(run_key(event.run_id)) is not None:
        raise _bad("the run already exists", "RUN_EXISTS")
    if event.seq != 1:
        raise _bad("run_created must be the run's first event", "ILLEGAL_TRANSITION")
    p = event.payload
    check_identifier(event.run_id, what="run_id")
    session_id = check_identifier(p.get("session_id"), what="session_id")
    slug = check_identifier(p.get("workflow_slug"), what="workflow_slug")
    workflow = p.get("workflow")
    if workflow is not None and not isinstance(workflow, Mapping):
        raise _bad("payload field 'workflow' must be an object")
    row: Row = {
        "run_id": event.run_id,
        "session_id": session_id,
        "workflow_slug": slug,
        "workflow": workflow,
        "tenant": _opt_str(p, "tenant"),
        "status": lifecycle.RunStatus.SUBMITTED.value,
        "error": None,
        "created_at": event.at,
        "updated_at": event.at,
        "snapshot_seq": event.seq,
    }
    return {run_key(event.run_id): row}


def _run_status_changed(event: EventFacts, get: Getter) -> Writes:
    run = get(run_key(event.run_id))
    if run is None:
        raise _bad("the ledger does not start with run_created", "RUN_NOT_FOUND")
    current = lifecycle.parse_run_status(run["status"])
    target = lifecycle.parse_run_status(event.payload.get("status"))
    error = event.payload.get("error")
    lifecycle.check_run_transition(current, target, error)
    return {run_key(event.run_id): {**_touch(run, event), "status": target.value, "error": error}}


def _task_created(event: EventFacts, get: Getter) -> Writes:
    run = _open_run(event, get)
    p = event.payload
    task_id = check_identifier(p.get("task_id"), what="task_id")
    if get(task_key(event.run_id, task_id)) is not None:
        raise _bad("the task already exists", "TASK_EXISTS")
    depends_on = p.get("depends_on", [])
    if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
        raise _bad("payload field 'depends_on' must be a list of task ids")
    task: Row = {
        "run_id": event.run_id,
        "task_id": task_id,
        "seq": event.seq,
        "status": lifecycle.TaskStatus.PENDING.value,
        "attempts": 0,
        "role": _opt_str(p, "role"),
        "profile": _opt_str(p, "profile"),
        "title": _opt_str(p, "title"),
        "depends_on": depends_on,
        "error": None,
        "handoffs": [],
        "created_at": event.at,
        "updated_at": event.at,
    }
    return {run_key(event.run_id): _touch(run, event), task_key(event.run_id, task_id): task}


def _existing_task(event: EventFacts, get: Getter) -> tuple[str, Row]:
    task_id = _str_field(event.payload, "task_id")
    task = get(task_key(event.run_id, task_id))
    if task is None:
        raise _bad("the task does not exist", "TASK_NOT_FOUND")
    return task_id, task


def _task_status_changed(event: EventFacts, get: Getter) -> Writes:
    run = _open_run(event, get)
    task_id, task = _existing_task(event, get)
    current = lifecycle.parse_task_status(task["status"])
    target = lifecycle.parse_task_status(event.payload.get("status"))
    error = event.payload.get("error")
    lifecycle.check_task_transition(current, target, error)
    updated = {
        **task,
        "status": target.value,
        "attempts": lifecycle.next_attempts(current, target, int(task["attempts"])),
        "error": error,
        "updated_at": event.at,
    }
    return {run_key(event.run_id): _touch(run, event), task_key(event.run_id, task_id): updated}


def _handoff_recorded(event: EventFacts, get: Getter) -> Writes:
    run = _open_run(event, get)
    task_id, task = _existing_task(event, get)
    handoff_id = check_identifier(event.payload.get("handoff_id"), what="handoff_id")
    status = lifecycle.parse_task_status(task["status"])
    if status in lifecycle.TASK_TERMINAL:
        raise _bad(f"a {status.value} task takes no handoff", "TASK_TERMINAL")
    # A handoff binds the attempt it starts: the next one unless the task is already running.
    attempt = int(task["attempts"]) + (0 if status is lifecycle.TaskStatus.RUNNING else 1)
    record = {
        **{k: v for k, v in event.payload.items() if k not in {"task_id", "handoff_id"}},
        "handoff_id": handoff_id,
        "task_id": task_id,
        "attempt": attempt,
        "seq": event.seq,
        "at": event.at,
    }
    updated = {**task, "handoffs": [*task["handoffs"], record], "updated_at": event.at}
    return {run_key(event.run_id): _touch(run, event), task_key(event.run_id, task_id): updated}


_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
_TRUST = frozenset({"internal", "external", "untrusted"})


def _artifact_registered(event: EventFacts, get: Getter) -> Writes:
    run = _open_run(event, get)
    p = event.payload
    artifact_id = check_identifier(p.get("artifact_id"), what="artifact_id")
    if get(artifact_key(event.run_id, artifact_id)) is not None:
        raise _bad("the artifact is already registered; artifacts are immutable", "ARTIFACT_EXISTS")
    sha = _str_field(p, "sha256")
    if not _SHA256.fullmatch(sha):
        raise _bad("payload field 'sha256' must be sha256:<64 hex>")
    size = p.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _bad("payload field 'size' must be a non-negative integer")
    trust = _str_field(p, "trust")
    if trust not in _TRUST:
        raise _bad("payload field 'trust' must be internal, external or untrusted")
    producer = p.get("producer", {})
    if not isinstance(producer, Mapping):
        raise _bad("payload field 'producer' must be an object")
    row: Row = {
        "run_id": event.run_id,
        "artifact_id": artifact_id,
        "seq": event.seq,
        "path": _str_field(p, "path"),
        "sha256": sha,
        "type": _opt_str(p, "type"),
        "media_type": _str_field(p, "media_type"),
        "size": size,
        "producer": {
            "task_id": producer.get("task_id"),
            "tool_id": producer.get("tool_id"),
            "call_id": producer.get("call_id"),
        },
        "trust": trust,
        "created_at": _opt_str(p, "created_at") or event.at,
    }
    return {run_key(event.run_id): _touch(run, event), artifact_key(event.run_id, artifact_id): row}


HANDLERS: dict[str, Handler] = {
    "run_created": Handler(reads=_reads_run, apply=_run_created),
    "run_status_changed": Handler(reads=_reads_run, apply=_run_status_changed),
    "task_created": Handler(reads=_reads_run_task, apply=_task_created),
    "task_status_changed": Handler(reads=_reads_run_task, apply=_task_status_changed),
    "handoff_recorded": Handler(reads=_reads_run_task, apply=_handoff_recorded),
    "artifact_registered": Handler(reads=_reads_run_artifact, apply=_artifact_registered),
}
"""Projection handlers by event type; a type without one changes no projection row."""

STATUS_EVENTS: Mapping[str, bool] = {"run_status_changed": False, "task_status_changed": True}
"""Event types the in-flight guard watches (value: whether the guard is scoped to a task)."""


def reads_for(run_id: str, type_: str, payload: Mapping[str, Any]) -> tuple[RowKey, ...]:
    handler = HANDLERS.get(type_)
    return handler.reads(run_id, payload) if handler else ()


# ---------------------------------------------------------------------------------------
# In-memory rebuild and the rendered snapshots


class Rebuild:
    """Rows rebuilt by applying events in order (verification and the memory store)."""

    def __init__(self) -> None:
        self.rows: dict[RowKey, Row] = {}

    def apply(self, event: EventFacts) -> None:
        handler = HANDLERS.get(event.type)
        if handler is not None:
            self.rows.update(handler.apply(event, self.rows.get))

    def run(self, run_id: str) -> Row | None:
        return self.rows.get(run_key(run_id))

    def listed(self, table: str, run_id: str) -> list[Row]:
        spec = TABLES[table]
        rows = [r for k, r in self.rows.items() if k.table == table and k.key[0] == run_id]
        return sorted(rows, key=spec.sort_key)


def manifest(run: Row, tasks: Iterable[Row], artifacts: Iterable[Row], *, head_seq: int) -> Row:
    """The seed's ``manifest.json``: the run's current state, rebuilt from its events."""
    task_list = list(tasks)
    handoffs = sorted((h for t in task_list for h in t["handoffs"]), key=lambda h: h["seq"])
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": run["session_id"],
        "run_id": run["run_id"],
        "workflow_slug": run["workflow_slug"],
        "workflow": run["workflow"],
        "status": run["status"],
        "error": run["error"],
        "tasks": [
            {k: v for k, v in t.items() if k not in {"handoffs", "run_id"}} for t in task_list
        ],
        "artifacts": [
            {"artifact_id": a["artifact_id"], "path": a["path"], "sha256": a["sha256"]}
            for a in artifacts
        ],
        "handoffs": handoffs,
        "created_at": run["created_at"],
        "updated_at": run["updated_at"],
        "snapshot_seq": run["snapshot_seq"],
        "event_count": head_seq,
        "last_event_id": event_id(head_seq),
    }


def artifact_index(run_id: str, artifacts: Iterable[Row]) -> Row:
    """The seed's ``artifacts/index.json``: checksummed provenance of every artifact."""
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "artifacts": list(artifacts)}


def _register_kernel_projections() -> None:
    """The kernel's tables and handlers (contexts, calls, approvals, run call counts)."""
    TABLES.update(calls_projection.TABLES)
    HANDLERS.update(calls_projection.HANDLERS)
    TABLES.update(proposals_projection.TABLES)
    HANDLERS.update(proposals_projection.HANDLERS)


_register_kernel_projections()
