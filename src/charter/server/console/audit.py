"""Audit search: the ``tool_call_recorded`` events of the tenant's runs, by actor, tool,
outcome and time (the ``since``/``until`` bounds compare RFC 3339 prefixes, UTC).

Audit events live in each run's ledger, so the search reads the most recent ``RUN_SCAN``
runs of the tenant; the page says so when it hits that bound.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from charter.errors import Failure
from charter.ledger.observe import observe_report
from charter.ledger.trust import LEDGER_DAMAGE, damage_reason
from charter.runtime import Runtime
from charter.server.console.runs import tenant_runs
from charter.server.console.web import Operator, console_of, operator, render
from charter.server.query import QueryRoute

router = APIRouter(route_class=QueryRoute)
RUN_SCAN = 200
MAX_ROWS = 500


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(
    request: Request,
    who: Annotated[Operator, Depends(operator)],
    actor: str = "",
    tool: str = "",
    outcome: str = "",
    since: str = "",
    until: str = "",
) -> HTMLResponse:
    console = console_of(request)
    runtime = console.state.runtime
    runs = await tenant_runs(console, who.principal.tenant)
    rows: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for run in runs[:RUN_SCAN]:
        if run["ledger"] is not None:  # refused: its events are not read
            refused.append({"run_id": run["run_id"], "reason": run["ledger"]["reason"]})
            continue
        try:
            rows += await _recorded(runtime, run["run_id"], actor, tool, outcome, since, until)
        except LEDGER_DAMAGE as exc:  # one damaged run never hides the others' audit
            refused.append({"run_id": run["run_id"], "reason": damage_reason(exc)})
    rows.sort(key=lambda r: str(r["at"]), reverse=True)
    return render(
        request,
        "audit.html",
        {
            "rows": rows[:MAX_ROWS],
            "truncated": len(rows) > MAX_ROWS,
            "refused": refused,
            "scanned_all": len(runs) <= RUN_SCAN,
            "run_scan": RUN_SCAN,
            "filters": {
                "actor": actor,
                "tool": tool,
                "outcome": outcome,
                "since": since,
                "until": until,
            },
            "page": "audit",
        },
        who=who,
    )


async def _recorded(
    runtime: Runtime,
    run_id: str,
    actor: str,
    tool: str,
    outcome: str,
    since: str,
    until: str,
) -> list[dict[str, Any]]:
    """One run's ``tool_call_recorded`` events that pass the filters, as audit rows (the run
    read whole first: one found damaged part way gives none)."""
    rows: list[dict[str, Any]] = []
    after = 0
    while True:
        events = await runtime.events(run_id, after=after, limit=1000)
        for event in events:
            if event.type != "tool_call_recorded":
                continue
            p = event.payload
            if (
                (actor and p.get("actor") != actor)
                or (tool and p.get("tool_id") != tool)
                or (outcome and p.get("outcome") != outcome)
                or (since and event.at < since)
                or (until and event.at[: len(until)] > until)
            ):
                continue
            rows.append({**p, "at": event.at, "run_id": run_id, "seq": event.seq})
        if len(events) < 1000:
            return rows
        after = events[-1].seq


@router.get("/audit/observe", response_class=HTMLResponse)
async def observe_page(
    request: Request,
    who: Annotated[Operator, Depends(operator)],
    since: str = "",
    until: str = "",
) -> HTMLResponse:
    """What enforce would have denied in observe mode, by tool and reason, over a range."""
    runtime = console_of(request).state.runtime
    runs = await tenant_runs(console_of(request), who.principal.tenant)
    run_ids = [str(r["run_id"]) for r in runs[:RUN_SCAN] if r["ledger"] is None]
    refused = [
        {"run_id": r["run_id"], "reason": r["ledger"]["reason"]}
        for r in runs[:RUN_SCAN]
        if r["ledger"] is not None
    ]

    async def events(run_id: str, after: int, limit: int) -> Any:
        return await runtime.events(run_id, after=after, limit=limit)

    error = None
    report = None
    try:
        report = await observe_report(run_ids, events, since=since, until=until, refused=refused)
    except Failure as exc:
        error = str(exc)
    return render(
        request,
        "audit_observe.html",
        {
            "report": report,
            "error": error,
            "scanned_all": len(runs) <= RUN_SCAN,
            "run_scan": RUN_SCAN,
            "filters": {"since": since, "until": until},
            "page": "audit",
        },
        who=who,
    )
