"""Runs: the tenant's runs with filters; a run page with its live timeline, tasks, calls,
artifacts (download), handoffs and the "verify ledger" action.

The run page's timeline follows ``/console/runs/{id}/stream?after=<seq>``: each new event is
sent as a rendered ``<li>`` (``event: timeline``, appended by htmx), and the calls table and
the run's status are re-sent when they change. The stream waits on the store's
``wait_for_events`` (LISTEN/NOTIFY on PostgreSQL), like the API's event stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from charter.errors import ConfigError, InvalidInput, PermissionDenied
from charter.kernel.sessions import listing
from charter.ledger.events import Event
from charter.ledger.projections import manifest
from charter.server.console.web import (
    TEMPLATES,
    Console,
    Operator,
    checked_form,
    console_of,
    operator,
    reason_field,
    render,
)
from charter.server.query import QueryRoute
from charter.server.streams import HeldStream

router = APIRouter(route_class=QueryRoute)
LIST_SCAN = 1000
TIMELINE_LIMIT = 2000
_CALL_EVENTS = frozenset(
    {
        "approval_requested",
        "approval_approved",
        "approval_rejected",
        "approval_expired",
        "approval_consumed",
        "tool_progress",
        "tool_call_recorded",
        "call_resolved",
    }
)


async def tenant_runs(console: Console, tenant: str) -> list[dict[str, Any]]:
    state = console.state
    summaries = await state.runtime.run_summaries(limit=LIST_SCAN, tenant=tenant)
    return [
        {
            **s.run,
            "event_count": s.event_count,
            "ledger": None if s.problem is None else s.problem.to_dict(),
        }
        for s in summaries
    ]


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(
    request: Request,
    who: Annotated[Operator, Depends(operator)],
    status: str = "",
    workflow: str = "",
    since: str = "",
    until: str = "",
    ended: str = "",
) -> HTMLResponse:
    # Open runs first; ended session runs (idle-closed, renewed) only when asked for (or
    # when a status filter names their status).
    runs = listing(
        await tenant_runs(console_of(request), who.principal.tenant),
        everything=bool(ended) or bool(status),
    )
    # A refused run is listed by its id alone (its rows are not served): shown whatever the
    # filters, since it is what an operator must look at.
    statuses = sorted({str(r["status"]) for r in runs if "status" in r})
    workflows = sorted({str(r["workflow_slug"]) for r in runs if "workflow_slug" in r})
    shown = [
        r
        for r in runs
        if "status" not in r
        or (
            (not status or r["status"] == status)
            and (not workflow or r["workflow_slug"] == workflow)
            and (not since or str(r["created_at"]) >= since)
            and (not until or str(r["created_at"])[: len(until)] <= until)
        )
    ]
    return render(
        request,
        "runs.html",
        {
            "runs": shown,
            "total": len(runs),
            "statuses": statuses,
            "workflows": workflows,
            "filters": {
                "status": status,
                "workflow": workflow,
                "since": since,
                "until": until,
                "ended": ended,
            },
            "page": "runs",
        },
        who=who,
    )


def as_tree(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's calls in delegation order: each delegating call followed by the calls made
    inside it (``depth`` one more, ``parent_call`` naming it), the rest in reservation order."""
    spans = {c["span_id"]: c for c in calls if c.get("delegates_execution") and c.get("span_id")}
    children: dict[str, list[dict[str, Any]]] = {}
    roots = []
    for c in calls:
        parent = c.get("parent_span_id")
        if isinstance(parent, str) and parent in spans and spans[parent] is not c:
            children.setdefault(parent, []).append(c)
        else:
            roots.append(c)
    out: list[dict[str, Any]] = []

    def place(c: dict[str, Any], depth: int, parent: str | None, seen: frozenset[str]) -> None:
        out.append({**c, "depth": depth, "parent_call": parent})
        span = c.get("span_id")
        if c.get("delegates_execution") and span and span not in seen:
            for child in children.get(span, ()):
                place(child, depth + 1, c["call_id"], seen | {span})

    for c in roots:
        place(c, 0, None, frozenset())
    return out


async def _run_parts(console: Console, run_id: str) -> dict[str, Any]:
    snap = await console.state.runtime.snapshot(run_id)
    if snap is None or snap.run is None:
        raise PermissionDenied("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    doc = manifest(snap.run, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq)
    calls = as_tree(sorted(snap.tables.get("calls", []), key=lambda c: c.get("reserved_seq") or 0))
    return {
        "run": snap.run,
        "manifest": doc,
        "tasks": snap.tables["tasks"],
        "artifacts": snap.tables["artifacts"],
        "calls": calls,
        "head_seq": snap.head.seq,
    }


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(
    request: Request,
    run_id: str,
    who: Annotated[Operator, Depends(operator)],
    verify: str = "",
) -> HTMLResponse:
    console = console_of(request)
    await console.state.check_run(run_id, who.principal)
    parts = await _run_parts(console, run_id)
    events = await console.state.runtime.events(run_id, after=0, limit=TIMELINE_LIMIT)
    report = None
    if verify:
        key = console.state.ledger_key
        if key is None:
            raise ConfigError("this server was started without the ledger key")
        report = (await console.state.runtime.verify(run_id, key)).to_dict()
    return render(
        request,
        "run.html",
        {
            **parts,
            "events": events,
            "after": events[-1].seq if events else 0,
            "report": report,
            "page": "runs",
        },
        who=who,
    )


def _fragment(name: str, **context: Any) -> str:
    return TEMPLATES.get_template(name).render(**context)


@router.get("/runs/{run_id}/stream")
async def run_stream(
    request: Request,
    run_id: str,
    who: Annotated[Operator, Depends(operator)],
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> Response:
    console = console_of(request)
    await console.state.check_run(run_id, who.principal)
    slot = console.state.streams.open(who.principal, "console")  # 429 at limits.streams
    runtime = console.state.runtime
    keepalive = console.state.sse_keepalive_s

    async def frames() -> AsyncIterator[bytes]:
        yield format_sse_event(comment="charter run timeline", retry=2000)
        last = after
        while not await request.is_disconnected():
            events: list[Event] = list(await runtime.events(run_id, after=last, limit=500))
            for event in events:
                last = event.seq
                yield format_sse_event(
                    id=str(event.seq),
                    event="timeline",
                    data_str=_fragment("_event.html", event=event),
                )
            if events and any(e.type in _CALL_EVENTS or e.type.startswith("run_") for e in events):
                parts = await _run_parts(console, run_id)
                yield format_sse_event(
                    event="calls", data_str=_fragment("_calls.html", calls=parts["calls"])
                )
                yield format_sse_event(
                    event="status", data_str=_fragment("_status.html", run=parts["run"])
                )
            if len(events) == 500:
                continue
            if not await runtime.store.wait_for_events(run_id, after=last, timeout=keepalive):
                yield KEEPALIVE_COMMENT

    return HeldStream(frames(), slot=slot)


@router.get("/runs/{run_id}/artifacts/{artifact_id}")
async def download_artifact(
    request: Request,
    run_id: str,
    artifact_id: str,
    who: Annotated[Operator, Depends(operator)],
) -> Response:
    console = console_of(request)
    await console.state.check_run(run_id, who.principal)
    parts = await _run_parts(console, run_id)
    record = next((a for a in parts["artifacts"] if a["artifact_id"] == artifact_id), None)
    if record is None:
        raise PermissionDenied("no such artifact", reason="ARTIFACT_NOT_FOUND")
    data = await console.state.runtime.artifacts.read_bytes(run_id, artifact_id)
    name = str(record.get("path", artifact_id)).rsplit("/", 1)[-1] or artifact_id
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{_safe(name)}"'},
    )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:120] or "artifact"


_TASK_ENDINGS = {"cancel": "cancelled", "fail": "failed", "skip": "skipped"}


async def _end(request: Request, run_id: str, status: str, task_id: str | None = None) -> Response:
    who, form = await checked_form(request)
    console = console_of(request)
    await console.state.check_run(run_id, who.principal)
    reason = reason_field(form)
    rt = console.state.runtime
    if task_id is None:
        await rt.operations.end_run(run_id, status, reason=reason, as_=who.principal)
    else:
        await rt.operations.end_task(run_id, task_id, status, reason=reason, as_=who.principal)
    return RedirectResponse(f"/console/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/cancel")
async def cancel_run(request: Request, run_id: str) -> Response:
    return await _end(request, run_id, "cancelled")


@router.post("/runs/{run_id}/fail")
async def fail_run(request: Request, run_id: str) -> Response:
    return await _end(request, run_id, "failed")


@router.post("/runs/{run_id}/tasks/{task_id}/{action}")
async def end_task(request: Request, run_id: str, task_id: str, action: str) -> Response:
    if action not in _TASK_ENDINGS:
        raise InvalidInput("the action is cancel, fail or skip", reason="TASK_ENDING_INVALID")
    return await _end(request, run_id, _TASK_ENDINGS[action], task_id)
