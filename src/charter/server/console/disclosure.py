"""A run's model disclosure: per context, the tools it offered against what applications (or
the chat orchestrator) reported sending the model; flags in both directions
(docs/kernel.md, "Model disclosure")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from charter.server.console.web import Operator, console_of, operator, render
from charter.server.query import QueryRoute
from charter.server.routes.disclosures import disclosure_of

router = APIRouter(route_class=QueryRoute)

FLAG_TEXT = {
    "reported_not_offered": "Reported but never offered",
    "offered_not_disclosed": "Offered but never disclosed",
    "version_mismatch": "Reported at another version",
    "schema_digest_mismatch": "Schema digest differs from the offer",
    "unknown_attachments": "Attachments the context never resolved",
    "over_token_budget": "Token counts over the context's budget",
}


@router.get("/runs/{run_id}/disclosure", response_class=HTMLResponse)
async def disclosure_page(
    request: Request, run_id: str, who: Annotated[Operator, Depends(operator)]
) -> HTMLResponse:
    console = console_of(request)
    await console.state.check_run(run_id, who.principal)
    found = await disclosure_of(console.state, run_id)
    return render(
        request,
        "disclosure.html",
        {"doc": found.to_dict(), "flag_text": FLAG_TEXT, "run_id": run_id, "page": "runs"},
        who=who,
    )
