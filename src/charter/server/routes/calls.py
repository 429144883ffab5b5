"""``POST /v1/contexts/{id}/calls``, ``GET /v1/calls/{context_id}/{call_id}`` and
``GET /v1/calls/{call_id}``.

A call answers with the v2 envelope; the HTTP status follows the call's status (table in
docs/server.md). Every outcome the kernel *recorded after dispatch* — succeeded, failed,
unknown, cancelled, abandoned — is ``200``: the request was processed and the envelope's
``status`` is the truth. A 5xx would invite generic HTTP retry logic to repeat a call whose
outcome is unknown, which is exactly what must never happen automatically.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from charter.contracts.delegation import PARENT_SPAN_HEADER
from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.delegation import family
from charter.kernel.endcall import recorded_answer
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.server.body import check_members, optional_str, parse_object, required_str
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.schemas import EnvelopeOut
from charter.server.state import ServerState, get_principal, get_state, principal_of, state_of

router = APIRouter(tags=["calls"], route_class=JsonRoute)

HTTP_STATUS: dict[CallStatus, int] = {
    CallStatus.SUCCEEDED: 200,
    CallStatus.FAILED: 200,
    CallStatus.UNKNOWN: 200,
    CallStatus.CANCELLED: 200,
    CallStatus.ABANDONED: 200,
    CallStatus.PENDING_APPROVAL: 202,
    CallStatus.DISPATCHING: 202,
    CallStatus.DENIED: 403,
    CallStatus.CONFLICT: 409,
    CallStatus.REJECTED: 422,
}
_MEMBERS = frozenset({"tool", "call_id", "arguments", "arguments_json", "approval_id", "task_id"})


def _envelope_response(status: int, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/EnvelopeOut"}}},
    }


CALL_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: _envelope_response(200, "succeeded, failed, unknown, cancelled or abandoned"),
    202: _envelope_response(202, "pending_approval, or a duplicate still dispatching"),
    403: _envelope_response(403, "denied"),
    409: _envelope_response(409, "conflict: the call id was used with other arguments"),
    503: {
        **_envelope_response(
            503,
            "denied retryably: the context needs another Build than this replica runs "
            "(a rolling deploy); no call was reserved or run (only the refusal is audited), "
            "call again on another replica",
        ),
        "headers": {
            "Retry-After": {
                "description": "seconds to wait before retrying",
                "schema": {"type": "integer"},
            }
        },
    },
    429: {
        **_envelope_response(429, "denied by a rate or concurrency limit: retry later"),
        "headers": {
            "Retry-After": {
                "description": "seconds to wait before retrying",
                "schema": {"type": "integer"},
            }
        },
    },
    422: {
        "description": "rejected (an envelope), or a body that breaks the API (a problem)",
        "content": {
            **_envelope_response(422, "")["content"],
            **problem_responses(422)[422]["content"],
        },
    },
    **problem_responses(400, 401, 404),
}


_PARENT_SPAN_DOC = (
    "The delegating call's span this call is made in (a remote executor's delegating tool "
    "passes the span_id it was given); the call is denied DELEGATION_PARENT_UNKNOWN unless that "
    "call is running in the same run"
)
# The call route's parameters, documented here and read in the handler itself: validating two
# strings through FastAPI's dependency machinery cost more than the rest of the route.
_CALL_PARAMETERS: list[dict[str, Any]] = [
    {
        "in": "path",
        "name": "context_id",
        "required": True,
        "schema": {"title": "Context Id", "type": "string"},
    },
    {
        "description": _PARENT_SPAN_DOC,
        "in": "header",
        "name": PARENT_SPAN_HEADER,
        "required": False,
        "schema": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": _PARENT_SPAN_DOC,
            "title": PARENT_SPAN_HEADER,
        },
    },
]


@router.post(
    "/contexts/{context_id}/calls",
    response_model=EnvelopeOut,
    responses=CALL_RESPONSES,
    openapi_extra={
        "parameters": _CALL_PARAMETERS,
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/CallRequest"}}
            },
        },
    },
    summary="Make one governed call",
)
async def make_call(request: Request) -> JSONResponse:
    # The hot route reads its parameters, caller and state itself rather than through FastAPI
    # dependencies, whose solving was an eighth of a governed call's time over HTTP.
    context_id: str = request.path_params["context_id"]
    parent_span = request.headers.get(PARENT_SPAN_HEADER)
    state = state_of(request)
    principal = principal_of(request)
    body = parse_object(await request.body(), keep_raw=frozenset({"arguments"}))
    check_members(body, _MEMBERS)
    tool = required_str(body, "tool")
    call_id = required_str(body, "call_id")
    approval_id = optional_str(body, "approval_id")
    task_id = optional_str(body, "task_id")  # a call into a catalog run names its task
    arguments = _arguments(body)
    started = time.perf_counter()
    try:
        envelope = await state.runtime.call(
            context_id,
            tool,
            call_id,
            arguments,
            as_=principal,
            approval_id=approval_id,
            task_id=task_id,
            trace_id=getattr(request.state, "trace_id", None),
            parent_span_id=parent_span,
        )
    except asyncio.CancelledError as stopped:
        # The server is stopping and its grace period ended under the call (a hang-up does
        # not cancel a request): the kernel recorded the call before handing the cancellation
        # back, so the client is told what became of it — its envelope (``unknown`` for a
        # tool cut off mid-run), never a bare 500 that a retry logic would take for "retry".
        recorded = recorded_answer(stopped)
        if recorded is None:
            raise
        envelope = recorded
    if envelope.error is not None and envelope.error.get("reason") == "CONTEXT_NOT_FOUND":
        raise PermissionDenied("no such context", reason="CONTEXT_NOT_FOUND")
    state.metrics.record_call(
        envelope.tool or "(undisclosed)",
        envelope.status.value,
        time.perf_counter() - started,
        envelope.error.get("reason") if envelope.error else None,
    )
    request.state.run_id = envelope.run_id
    request.state.call_id = envelope.call_id
    return envelope_json(envelope)


def _arguments(body: dict[str, Any]) -> str:
    """The arguments' JSON text for the kernel's strict parser: ``arguments`` as written, or
    ``arguments_json``; ``{}`` only when neither member is there. A member that is there is
    never taken for an absent one: ``null`` in either reaches the parser as ``null`` (rejected
    ``ARGS_NOT_OBJECT`` and audited, as ``"arguments_json": "null"`` always was), and naming
    both — one of them ``null`` included — is refused before anything is recorded."""
    if "arguments" in body and "arguments_json" in body:
        raise InvalidInput("give arguments or arguments_json, not both", reason="REQUEST_INVALID")
    if "arguments" in body:
        raw = optional_str(body, "arguments")  # the member's exact text (kept raw)
        return raw if raw is not None else "null"
    if "arguments_json" in body:
        text = optional_str(body, "arguments_json", text=True)
        return text if text is not None else "null"
    return "{}"


THROTTLED = frozenset({"RATE_LIMITED", "CONCURRENCY_LIMITED"})
ELSEWHERE = frozenset({"CONTEXT_BUILD_CHANGED"})


def envelope_json(envelope: Envelope) -> JSONResponse:
    error = envelope.error or {}
    # Charter's own limit refusal (denied, nothing recorded: the same call may come again):
    # 429 with Retry-After, the envelope as the body. An executor's RATE_LIMITED is a
    # recorded failure, answered as one.
    if envelope.status is CallStatus.DENIED and error.get("reason") in THROTTLED:
        retry = error.get("retry_after")
        seconds = max(1, math.ceil(retry)) if isinstance(retry, int | float) else 1
        return JSONResponse(
            envelope.to_dict(), status_code=429, headers={"Retry-After": str(seconds)}
        )
    # A context of a Build this replica's deployment has moved past the replica's own (a
    # rolling deploy): no call was reserved or run, another replica can answer. 503 + Retry-After,
    # which load balancers retry on another upstream; the envelope names the Build needed.
    # (The current Build's refusal of an older context is final: 403, not retryable.)
    elsewhere = error.get("reason") in ELSEWHERE and error.get("retryable") is True
    if envelope.status is CallStatus.DENIED and elsewhere:
        return JSONResponse(envelope.to_dict(), status_code=503, headers={"Retry-After": "1"})
    return JSONResponse(envelope.to_dict(), status_code=HTTP_STATUS.get(envelope.status, 200))


@router.get(
    "/calls/{call_id}",
    responses=problem_responses(401, 404, 409),
    summary="A call by its id alone, when one context of your tenant has it",
)
async def get_call_by_id(
    call_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    """``GET /v1/calls/{call_id}``: the call with that id in the caller's tenant. A call id
    is unique within a context, so the same id in two contexts is ``409
    CALL_ID_AMBIGUOUS`` naming them (ask ``/v1/calls/{context_id}/{call_id}``)."""
    return await _call_answer(state, None, call_id, principal)


@router.get(
    "/calls/{context_id}/{call_id}",
    responses=problem_responses(401, 404),
    summary="A call's state and recorded receipt (readable after the context expired)",
)
async def get_call(
    context_id: str,
    call_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    return await _call_answer(state, context_id, call_id, principal)


async def _call_answer(
    state: ServerState, context_id: str | None, call_id: str, principal: Principal
) -> dict[str, Any]:
    call = await state.runtime.get_call(context_id, call_id, as_=principal)
    out = call.to_dict()
    tree = await family(state.runtime.store, call)
    if tree is not None:  # a delegating or delegated call: its parent and children
        out["delegation"] = tree
    return out
