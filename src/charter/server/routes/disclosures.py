"""Model-disclosure reports (docs/kernel.md, "Model disclosure").

``POST /v1/contexts/{id}/disclosures`` records what an application actually sent its model
for a context; ``GET /v1/runs/{id}/disclosures`` compares, per context of the run, what was
offered with what was reported.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from charter.kernel.principals import Principal
from charter.proof.disclosure import DisclosureReport, RunDisclosure, compare
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.state import ServerState, get_principal, get_state

router = APIRouter(tags=["disclosures"], route_class=JsonRoute)
_PAGE = 1000


@router.post(
    "/contexts/{context_id}/disclosures",
    status_code=201,
    responses=problem_responses(401, 404, 422),
    summary="Report what one model request actually carried (tools, schemas, attachments)",
)
async def report_disclosure(
    context_id: str,
    body: DisclosureReport,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> dict[str, Any]:
    return await state.runtime.report_disclosure(context_id, body.model_dump(), as_=principal)


@router.get(
    "/runs/{run_id}/disclosures",
    responses=problem_responses(401, 404),
    summary="Offered tools against reported model disclosure, per context of a run",
)
async def run_disclosures(
    run_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100_000,
) -> dict[str, Any]:
    await state.check_run(run_id, principal)
    found: RunDisclosure = await disclosure_of(state, run_id, limit=limit)
    return found.to_dict()


async def disclosure_of(state: ServerState, run_id: str, *, limit: int = 100_000) -> RunDisclosure:
    """The comparison for one run, read page by page (the console uses it too)."""
    events: list[Any] = []
    after = 0
    while len(events) < limit:
        page = await state.runtime.events(run_id, after=after, limit=_PAGE)
        events.extend(page)
        if len(page) < _PAGE:
            break
        after = page[-1].seq
    return compare(run_id, events)
