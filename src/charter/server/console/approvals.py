"""The approvals inbox: pending approvals of the operator's tenant, approve / reject forms,
and a live list over SSE.

The stream (``/console/approvals/stream``) re-reads the tenant's pending approvals every
``poll_s`` seconds and sends the rendered list (``event: approvals``) whenever it changed —
an approval arrived, was decided elsewhere, or expired. Approvals live in each run's ledger,
so there is no single tenant-wide event to wait on; the re-read is one indexed query.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event
from starlette.datastructures import FormData

from charter.ledger.views import ApprovalRow
from charter.server.console.views import seconds_left
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
from charter.server.query import QueryRoute
from charter.server.streams import HeldStream

router = APIRouter(route_class=QueryRoute)
SCAN = 500
RECENT = 15
KEEPALIVE_EVERY = 15


async def inbox(console: Console, tenant: str) -> tuple[list[ApprovalRow], list[ApprovalRow]]:
    """Pending (still live) approvals, oldest first, and the most recent decided ones."""
    rows = await console.state.runtime.approvals(tenant=tenant, limit=SCAN)
    live = {r.approval_id for r in rows if r.status == "pending" and seconds_left(r.expires_at) > 0}
    pending = [r for r in rows if r.approval_id in live]
    done = [
        r._replace(status="expired") if r.status == "pending" else r
        for r in rows
        if r.approval_id not in live
    ]
    done.sort(key=lambda r: r.decided_at or r.expires_at or "", reverse=True)
    return pending, done[:RECENT]


def list_html(request: Request, who: Operator, pending: list[ApprovalRow]) -> str:
    template = TEMPLATES.get_template("_approvals_list.html")
    return template.render(request=request, who=who, pending=pending, csrf_field="csrf_token")


@router.get("/approvals", response_class=HTMLResponse)
async def approvals_page(
    request: Request,
    who: Annotated[Operator, Depends(operator)],
    decided: str | None = None,
    outcome: str | None = None,
) -> HTMLResponse:
    pending, recent = await inbox(console_of(request), who.principal.tenant)
    notice = None
    if decided and outcome in ("approved", "rejected"):
        notice = f"Approval {decided} {outcome}."
    return render(
        request,
        "approvals.html",
        {"pending": pending, "recent": recent, "notice": notice, "page": "approvals"},
        who=who,
    )


@router.get("/approvals/{approval_id}/arguments", response_class=HTMLResponse)
async def approval_arguments(
    request: Request, approval_id: str, who: Annotated[Operator, Depends(operator)]
) -> HTMLResponse:
    """One approval's full redacted arguments (the inbox shows a clamped preview)."""
    row = await console_of(request).state.runtime.get_approval(
        approval_id, as_=who.principal, full=True
    )
    return render(request, "approval_arguments.html", {"a": row, "page": "approvals"}, who=who)


@router.get("/approvals/stream")
async def approvals_stream(
    request: Request, who: Annotated[Operator, Depends(operator)]
) -> Response:
    console = console_of(request)
    poll_s = float(request.app.state.console_poll_s)
    slot = console.state.streams.open(who.principal, "console")  # 429 at limits.streams

    async def frames() -> AsyncIterator[bytes]:
        yield format_sse_event(comment="charter approvals", retry=2000)
        last: str | None = None
        quiet = 0.0
        while not await request.is_disconnected():
            pending, _ = await inbox(console, who.principal.tenant)
            signature = hashlib.sha256(
                "|".join(f"{r.approval_id}:{r.status}" for r in pending).encode()
            ).hexdigest()
            if signature != last:
                last = signature
                quiet = 0.0
                html = list_html(request, who, pending)
                yield format_sse_event(event="approvals", data_str=html)
            elif quiet >= KEEPALIVE_EVERY:
                quiet = 0.0
                yield KEEPALIVE_COMMENT
            await asyncio.sleep(poll_s)
            quiet += poll_s

    return HeldStream(frames(), slot=slot)


async def _decide(request: Request, approval_id: str, approve: bool) -> Response:
    who, form = await checked_form(request)
    reason = reason_field(form) or None
    await console_of(request).state.runtime.decide(
        approval_id, approve=approve, as_=who.principal, reason=reason
    )
    outcome = "approved" if approve else "rejected"
    target = _back(form) or "/console/approvals"
    return RedirectResponse(f"{target}?decided={approval_id}&outcome={outcome}", status_code=303)


def _back(form: FormData) -> str | None:
    back = field(form, "back")
    return back if back.startswith("/console/") and "//" not in back else None


@router.post("/approvals/{approval_id}/approve")
async def approve(request: Request, approval_id: str) -> Response:
    return await _decide(request, approval_id, True)


@router.post("/approvals/{approval_id}/reject")
async def reject(request: Request, approval_id: str) -> Response:
    return await _decide(request, approval_id, False)
