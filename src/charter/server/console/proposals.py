"""Proposals: the tenant's proposals with a status filter; a proposal's page with its kind,
target, baseline, rationale, warnings, diagnostics and diff; approve / reject / apply forms.

Apply goes through :meth:`ProposalService.apply`: a fresh validation, the baseline check,
then the applier through the kernel. Its refusals re-render the proposal's page with the
API's status (``409`` stale baseline, ``422`` no longer valid, ``400`` illegal transition,
``403`` missing permission) and what to do about it; another tenant's proposal is a ``404``
like a missing one. Apply also needs the form's confirmation box (``422
CONFIRMATION_REQUIRED`` without it).

Live updates: the list (``/console/proposals/stream``) and a proposal's status and history
(``/console/proposals/{id}/stream``) re-read the proposals every ``poll_s`` seconds and send
a rendered fragment only when something changed — proposals live in their runs' ledgers, so
there is no single tenant-wide event to wait on; the re-read is one indexed query.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from charter.errors import Failure, InvalidInput
from charter.server.console.proposal_views import (
    STATUSES,
    diagnostics_of,
    diff_of,
    effective_status,
    hint_for,
    signature,
    warnings_of,
)
from charter.server.console.web import (
    TEMPLATES,
    Console,
    Operator,
    checked_form,
    console_of,
    field,
    operator,
    reason_field,
    render,
)
from charter.server.problems import status_for
from charter.server.query import QueryRoute
from charter.server.streams import HeldStream

router = APIRouter(route_class=QueryRoute)
LIST_LIMIT = 200
SCAN = 1000
KEEPALIVE_EVERY = 15
STATUS_BY_REASON = {
    "PROPOSAL_BASELINE_STALE": 409,
    "PROPOSAL_INVALID": 422,
    "PROPOSAL_ILLEGAL_TRANSITION": 400,
    "CONFIRMATION_REQUIRED": 422,
}
DONE = {"approved": "approved", "rejected": "rejected", "applied": "applied"}


async def _listing(console: Console, tenant: str, status: str) -> list[dict[str, Any]]:
    """The newest ``LIST_LIMIT`` of the scanned proposals; ``expired`` is computed (an open
    proposal past its lifetime), any other status is also asked of the store (an indexed
    column). The store answers oldest first, hence the wider scan."""
    recorded = status if status and status != "expired" else None
    rows = await console.proposals.list(tenant=tenant, status=recorded, limit=SCAN)
    shown = [r | {"shown_status": effective_status(r)} for r in rows]
    if status:
        shown = [r for r in shown if r["shown_status"] == status]
    shown.sort(key=lambda r: str(r.get("created_at") or ""), reverse=True)
    return shown[:LIST_LIMIT]


def _fragment(name: str, **context: Any) -> str:
    return TEMPLATES.get_template(name).render(**context)


@router.get("/proposals", response_class=HTMLResponse)
async def proposals_page(
    request: Request, who: Annotated[Operator, Depends(operator)], status: str = ""
) -> HTMLResponse:
    status = status if status in STATUSES else ""
    rows = await _listing(console_of(request), who.principal.tenant, status)
    return render(
        request,
        "proposals.html",
        {
            "proposals": rows,
            "statuses": STATUSES,
            "status": status,
            "seen": signature(rows),
            "page": "proposals",
        },
        who=who,
    )


def _poll(
    request: Request,
    who: Operator,
    seen: str,
    read: Callable[[], Awaitable[tuple[str, str]]],
    event: str,
) -> Response:
    """An SSE stream that sends ``read()``'s fragment whenever its signature changes."""
    poll_s = float(request.app.state.console_poll_s)
    slot = console_of(request).state.streams.open(who.principal, "console")  # 429 at the cap

    async def frames() -> AsyncIterator[bytes]:
        yield format_sse_event(comment="charter proposals", retry=2000)
        last, quiet = seen, 0.0
        while not await request.is_disconnected():
            current, html = await read()
            if current != last:
                last, quiet = current, 0.0
                yield format_sse_event(event=event, data_str=html)
            elif quiet >= KEEPALIVE_EVERY:
                quiet = 0.0
                yield KEEPALIVE_COMMENT
            await asyncio.sleep(poll_s)
            quiet += poll_s

    return HeldStream(frames(), slot=slot)


@router.get("/proposals/stream")
async def proposals_stream(
    request: Request,
    who: Annotated[Operator, Depends(operator)],
    status: str = "",
    seen: str = "",
) -> Response:
    console, tenant = console_of(request), who.principal.tenant
    status = status if status in STATUSES else ""

    async def read() -> tuple[str, str]:
        rows = await _listing(console, tenant, status)
        return signature(rows), _fragment("_proposals_table.html", proposals=rows, status=status)

    return _poll(request, who, seen, read, "proposals")


def _detail(row: dict[str, Any], who: Operator) -> dict[str, Any]:
    return {
        "p": row,
        "shown_status": effective_status(row),
        "diff": diff_of(row.get("diff"), row.get("payload")),
        "diagnostics": diagnostics_of(row.get("diagnostics")),
        "warnings": warnings_of(row.get("warnings")),
        "may_approve": who.principal.has("proposals:approve"),
        "may_apply": who.principal.has("proposals:apply"),
        "seen": signature([row]),
        "page": "proposals",
    }


@router.get("/proposals/{proposal_id}", response_class=HTMLResponse)
async def proposal_page(
    request: Request,
    proposal_id: str,
    who: Annotated[Operator, Depends(operator)],
    done: str = "",
) -> HTMLResponse:
    row = await console_of(request).proposals.get(proposal_id, who.principal.tenant)
    notice = f"Proposal {proposal_id} {DONE[done]}." if done in DONE else None
    return render(request, "proposal.html", {**_detail(row, who), "notice": notice}, who=who)


@router.get("/proposals/{proposal_id}/stream")
async def proposal_stream(
    request: Request,
    proposal_id: str,
    who: Annotated[Operator, Depends(operator)],
    seen: str = "",
) -> Response:
    console, tenant = console_of(request), who.principal.tenant
    await console.proposals.get(proposal_id, tenant)  # another tenant's: 404 before streaming

    async def read() -> tuple[str, str]:
        row = await console.proposals.get(proposal_id, tenant)
        html = _fragment("_proposal_status.html", p=row, shown_status=effective_status(row))
        return signature([row]), html

    return _poll(request, who, seen, read, "status")


async def _act(request: Request, proposal_id: str, action: str) -> Response:
    who, form = await checked_form(request)
    console = console_of(request)
    service = console.proposals
    try:
        if action == "apply":
            if field(form, "confirm") != "yes":
                raise _unconfirmed()
            reason = reason_field(form) or None
            await service.apply(proposal_id, principal=who.principal, reason=reason)
        else:
            reason = reason_field(form) or None
            await service.decide(
                proposal_id, approve=action == "approved", principal=who.principal, reason=reason
            )
    except Failure as exc:
        if exc.reason == "PROPOSAL_NOT_FOUND":
            raise
        return await _refused(request, who, proposal_id, exc)
    done = "applied" if action == "apply" else action
    return RedirectResponse(f"/console/proposals/{proposal_id}?done={done}", status_code=303)


def _unconfirmed() -> Failure:
    return InvalidInput(
        "confirm that you checked the diff before applying", reason="CONFIRMATION_REQUIRED"
    )


async def _refused(request: Request, who: Operator, proposal_id: str, exc: Failure) -> Response:
    """The proposal's page again, with the refusal, its status and what to do about it."""
    row = await console_of(request).proposals.get(proposal_id, who.principal.tenant)
    status = STATUS_BY_REASON.get(exc.reason) or status_for(exc.code, exc.reason)
    fresh = exc.details.get("diagnostics")
    error = {
        "status": status,
        "reason": exc.reason,
        "message": exc.message,
        "hint": hint_for(exc.reason),
        "diagnostics": diagnostics_of(fresh) if fresh is not None else None,
    }
    return render(
        request, "proposal.html", {**_detail(row, who), "error": error}, who=who, status=status
    )


@router.post("/proposals/{proposal_id}/approve")
async def approve(request: Request, proposal_id: str) -> Response:
    return await _act(request, proposal_id, "approved")


@router.post("/proposals/{proposal_id}/reject")
async def reject(request: Request, proposal_id: str) -> Response:
    return await _act(request, proposal_id, "rejected")


@router.post("/proposals/{proposal_id}/apply")
async def apply(request: Request, proposal_id: str) -> Response:
    return await _act(request, proposal_id, "apply")
