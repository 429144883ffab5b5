"""``/v1/runs``: create an ad-hoc run, list your tenant's runs, read a manifest, read or
stream its events (JSON or SSE), verify its ledger; operators cancel or fail a run and cancel,
fail or skip a task (``charter.kernel.endings``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from charter.errors import ConfigError, InvalidInput, PermissionDenied
from charter.kernel.kernel import ADHOC_SLUG
from charter.kernel.principals import Principal
from charter.ledger.events import Event, NewEvent
from charter.ledger.ids import new_id
from charter.ledger.projections import artifact_index, manifest
from charter.ledger.subscribe import run_has_ended
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.schemas import EndRequest, EventsOut, VerifyOut
from charter.server.sse import event_stream, parse_last_event_id
from charter.server.state import ServerState, get_principal, get_state
from charter.server.streams import HeldStream, retry_after_responses
from charter.workflows.entry import CatalogRunRequest, create_catalog_run, inputs_from_request

router = APIRouter(tags=["runs"], route_class=JsonRoute)

# Runs carry their tenant in their first event, not in an indexed column, so listing reads
# this many recent runs and keeps the caller's (see docs/server.md, "limits").
LIST_SCAN = 1000


@router.post(
    "/runs",
    status_code=201,
    responses=problem_responses(401, 422),
    summary="Create an ad-hoc run, or a catalog workflow run with `workflow` and `inputs`",
)
async def create_run(
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    body: CatalogRunRequest | None = None,
) -> dict[str, Any]:
    if body is not None and body.workflow is not None:
        # a catalog workflow: pinned contract, its tasks, the given inputs (docs/workflows.md)
        inputs = inputs_from_request(body.inputs)
        run_id = await create_catalog_run(
            state.runtime, principal, body.workflow, inputs, session_id=body.session_id
        )
        return await _manifest(state, run_id)
    if body is not None and body.inputs:
        raise InvalidInput("inputs need a workflow", reason="RUN_INPUTS_MISMATCH")
    state.runtime.redactor.refuse_in_id(body.session_id if body else None, "session_id")
    run_id = new_id(ADHOC_SLUG)
    await state.runtime.record(
        run_id,
        [
            NewEvent(
                type="run_created",
                payload={
                    "session_id": (body.session_id if body and body.session_id else run_id),
                    "workflow_slug": ADHOC_SLUG,
                    "tenant": principal.tenant,
                    "created_by": principal.name,
                },
            ),
            NewEvent(type="run_status_changed", payload={"status": "planning"}),
            NewEvent(type="run_status_changed", payload={"status": "running"}),
        ],
    )
    return await _manifest(state, run_id)


@router.get(
    "/runs",
    responses=problem_responses(401, 422),
    summary="Your tenant's runs; `ledger` names why a run is refused (damaged, quarantined)",
)
async def list_runs(
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    limit: Annotated[int, Query(ge=1, le=LIST_SCAN)] = 50,
) -> list[dict[str, Any]]:
    summaries = await state.runtime.run_summaries(limit=limit, tenant=principal.tenant)
    return [
        {
            **s.run,
            "event_count": s.event_count,
            "ledger": None if s.problem is None else s.problem.to_dict(),
        }
        for s in summaries
    ]


async def _manifest(state: ServerState, run_id: str) -> dict[str, Any]:
    snap = await state.runtime.snapshot(run_id)
    if snap is None or snap.run is None:
        raise PermissionDenied("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    doc = manifest(snap.run, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq)
    doc["artifact_index"] = artifact_index(run_id, snap.tables["artifacts"])["artifacts"]
    return doc


@router.get("/runs/{run_id}", responses=problem_responses(401, 404), summary="A run's manifest")
async def get_run(
    run_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    await state.check_run(run_id, principal)
    return await _manifest(state, run_id)


@router.get(
    "/runs/{run_id}/events",
    response_model=EventsOut,
    responses={
        200: {
            "description": "JSON, or an SSE stream when the client accepts text/event-stream",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **problem_responses(401, 404, 422),
        **retry_after_responses(),
    },
    summary="A run's events after a sequence number (JSON) or as a resumable SSE stream",
)
async def run_events(
    run_id: str,
    request: Request,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    await state.check_run(run_id, principal)
    resume = parse_last_event_id(last_event_id)
    start = max(after, resume) if resume is not None else after
    if wants_event_stream(request.headers.get("accept", "")):
        slot = state.streams.open(principal, "runs")  # 429 TOO_MANY_STREAMS at the cap
        return HeldStream(
            event_stream(
                state.runtime.store,
                run_id,
                after=start,
                keepalive_s=state.sse_keepalive_s,
                ended=lambda: run_has_ended(state.runtime.store, run_id),
            ),
            slot=slot,
        )
    head = await state.runtime.store.head(run_id)
    events: Sequence[Event] = []
    if head is not None and start < head.seq:
        events = await state.runtime.events(run_id, after=start, limit=limit)
    next_after = events[-1].seq if events else start
    return JSONResponse(
        {"run_id": run_id, "events": [e.to_dict() for e in events], "next_after": next_after}
    )


@router.get(
    "/runs/{run_id}/verify",
    response_model=VerifyOut,
    responses=problem_responses(401, 404),
    summary="Verify a run: chain, head MAC, lifecycles, projections, artifact files",
)
async def verify(
    run_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    await state.check_refused_run(run_id, principal)  # a refused run can still be verified
    if state.ledger_key is None:
        raise ConfigError("this server was started without the ledger key")
    report = await state.runtime.verify(run_id, state.ledger_key)
    return report.to_dict()


_RUN_ACTIONS = {"cancel": "cancelled", "fail": "failed"}
_TASK_ACTIONS = {"cancel": "cancelled", "fail": "failed", "skip": "skipped"}


async def _end_run(
    state: ServerState, principal: Principal, run_id: str, status: str, body: EndRequest
) -> dict[str, Any]:
    await state.check_run(run_id, principal)
    await state.runtime.operations.end_run(run_id, status, reason=body.reason, as_=principal)
    return await _manifest(state, run_id)


@router.post(
    "/runs/{run_id}/cancel",
    responses=problem_responses(401, 403, 404, 422),
    summary="An operator cancels an open run (its calls in flight settle first)",
)
async def cancel_run(
    run_id: str,
    body: EndRequest,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    return await _end_run(state, principal, run_id, "cancelled", body)


@router.post(
    "/runs/{run_id}/fail",
    responses=problem_responses(401, 403, 404, 422),
    summary="An operator fails an open run (its calls in flight settle first)",
)
async def fail_run(
    run_id: str,
    body: EndRequest,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    return await _end_run(state, principal, run_id, "failed", body)


@router.post(
    "/runs/{run_id}/tasks/{task_id}/{action}",
    responses=problem_responses(401, 403, 404, 422),
    summary="An operator cancels, fails or skips a task (action: cancel | fail | skip)",
)
async def end_task(
    run_id: str,
    task_id: str,
    action: str,
    body: EndRequest,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    if action not in _TASK_ACTIONS:
        raise InvalidInput("the action is cancel, fail or skip", reason="TASK_ENDING_INVALID")
    await state.check_run(run_id, principal)
    return await state.runtime.operations.end_task(
        run_id, task_id, _TASK_ACTIONS[action], reason=body.reason, as_=principal
    )


def wants_event_stream(accept: str) -> bool:
    """Whether ``Accept`` asks for the SSE stream: ``text/event-stream`` named with a weight
    above zero and not below ``application/json``'s (``q=0`` is "not acceptable", RFC 9110
    12.5.1). Without it, JSON (``*/*`` included)."""
    weights: dict[str, float] = {}
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        media = media.lower()
        weights[media] = max(weights.get(media, 0.0), q)
    sse = weights.get("text/event-stream", 0.0)
    return sse > 0 and sse >= weights.get("application/json", 0.0)
