"""Calls needing attention: ``unknown`` outcomes of the operator's tenant, each with a form
to record what really happened (succeeded, failed or abandoned) and why; and the tenant's
runs refused because their ledger failed verification or was quarantined."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from charter.errors import InvalidInput
from charter.server.console.web import (
    Operator,
    checked_form,
    console_of,
    field,
    operator,
    reason_field,
    render,
)
from charter.server.query import QueryRoute

router = APIRouter(route_class=QueryRoute)
SCAN = 500
REFUSED_SCAN = 1000  # the tenant's newest runs looked at for refused ones
OUTCOMES = ("succeeded", "failed", "abandoned")


@router.get("/attention", response_class=HTMLResponse)
async def attention_page(
    request: Request,
    who: Annotated[Operator, Depends(operator)],
    resolved: str | None = None,
) -> HTMLResponse:
    runtime = console_of(request).state.runtime
    rows = await runtime.calls(tenant=who.principal.tenant, state="unknown", limit=SCAN)
    summaries = await runtime.run_summaries(tenant=who.principal.tenant, limit=REFUSED_SCAN)
    refused = [s.problem for s in summaries if s.problem is not None]
    return render(
        request,
        "attention.html",
        {
            "calls": [row.to_dict() for row in rows],  # the stored rows: late results too
            "refused": refused,
            "outcomes": OUTCOMES,
            "notice": f"Call {resolved} resolved." if resolved else None,
            "page": "attention",
        },
        who=who,
    )


@router.post("/attention/{context_id}/{call_id}")
async def resolve(request: Request, context_id: str, call_id: str) -> Response:
    who, form = await checked_form(request)
    outcome, reason = field(form, "outcome"), reason_field(form)
    if not reason:
        raise InvalidInput("say what you found (the reason is required)", reason="REASON_REQUIRED")
    await console_of(request).state.runtime.resolve_call(
        context_id, call_id, outcome=outcome, reason=reason, as_=who.principal
    )
    return RedirectResponse(f"/console/attention?resolved={call_id}", status_code=303)
