"""``/v1/proposals``: your tenant's proposals; approve, reject and apply them.

Apply answers ``409 PROPOSAL_BASELINE_STALE`` when the target changed since the proposal,
``422 PROPOSAL_INVALID`` when it no longer validates, ``400 PROPOSAL_ILLEGAL_TRANSITION``
before approval, ``403`` without ``proposals:apply``; another tenant's proposal is ``404``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request

from charter.kernel.principals import Principal
from charter.proposals.service import ProposalService, load_proposal_settings
from charter.server.intake import JsonRoute
from charter.server.problems import STATUS_BY_REASON, problem_responses
from charter.server.schemas import DecisionRequest, ProposalStatus
from charter.server.state import ServerState, get_principal, get_state, state_of

router = APIRouter(tags=["proposals"], route_class=JsonRoute)

STATUS_BY_REASON.update(
    {
        "PROPOSAL_NOT_FOUND": 404,
        "PROPOSAL_BASELINE_STALE": 409,
        "PROPOSAL_ILLEGAL_TRANSITION": 400,
        "PROPOSAL_INVALID": 422,
        "CONVERSATION_NOT_FOUND": 404,
        "TURN_IN_PROGRESS": 409,
    }
)


def proposals_of(request: Request) -> ProposalService:
    service: ProposalService | None = getattr(request.app.state, "charter_proposals", None)
    if service is None:
        runtime = state_of(request).runtime
        settings = load_proposal_settings(runtime.deployment.source)
        service = ProposalService(runtime, settings)
        request.app.state.charter_proposals = service
    return service


async def proposal_service(request: Request) -> ProposalService:
    return proposals_of(request)


Service = Annotated[ProposalService, Depends(proposal_service)]
Caller = Annotated[Principal, Depends(get_principal)]


@router.get("/proposals", responses=problem_responses(401, 422), summary="Your tenant's proposals")
async def list_proposals(
    principal: Caller,
    service: Service,
    state: Annotated[ServerState, Depends(get_state)],
    status: ProposalStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    return await service.list(tenant=principal.tenant, status=status, limit=limit)


@router.get("/proposals/{proposal_id}", responses=problem_responses(401, 404))
async def get_proposal(proposal_id: str, principal: Caller, service: Service) -> dict[str, Any]:
    return await service.get(proposal_id, principal.tenant)


@router.post("/proposals/{proposal_id}/approve", responses=problem_responses(400, 401, 403, 404))
async def approve_proposal(
    proposal_id: str,
    principal: Caller,
    service: Service,
    body: Annotated[DecisionRequest | None, Body()] = None,
) -> dict[str, Any]:
    reason = body.reason if body else None
    return await service.decide(proposal_id, approve=True, principal=principal, reason=reason)


@router.post("/proposals/{proposal_id}/reject", responses=problem_responses(400, 401, 403, 404))
async def reject_proposal(
    proposal_id: str,
    principal: Caller,
    service: Service,
    body: Annotated[DecisionRequest | None, Body()] = None,
) -> dict[str, Any]:
    reason = body.reason if body else None
    return await service.decide(proposal_id, approve=False, principal=principal, reason=reason)


@router.post(
    "/proposals/{proposal_id}/apply", responses=problem_responses(400, 401, 403, 404, 409, 422)
)
async def apply_proposal(
    proposal_id: str,
    principal: Caller,
    service: Service,
    body: Annotated[DecisionRequest | None, Body()] = None,
) -> dict[str, Any]:
    reason = body.reason if body else None
    return await service.apply(proposal_id, principal=principal, reason=reason)
