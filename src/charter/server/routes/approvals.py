"""``/v1/approvals``: the approvals inbox of the caller's tenant; approve and reject.

Approve/reject accept an **operator** principal holding ``approvals:approve`` (bearer API key
or JWT), or — in a standalone deployment — the approval token in ``X-Charter-Approval-Token``
with the tenant in ``X-Charter-Tenant`` (or the body's ``tenant``). An application principal
is refused with ``403 APPROVER_NOT_HUMAN``, whatever permissions it lists.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request

from charter.errors import InvalidInput
from charter.kernel.principals import Principal
from charter.server.auth import APPROVAL_TOKEN_HEADER, TENANT_HEADER, credential_header
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.schemas import ApprovalStatus, DecisionRequest
from charter.server.state import ServerState, get_principal, get_state, principal_of

router = APIRouter(tags=["approvals"], route_class=JsonRoute)


@router.get(
    "/approvals",
    responses=problem_responses(401, 422),
    summary="Approvals of your tenant, oldest first",
)
async def list_approvals(
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    status: ApprovalStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    rows = await state.runtime.approvals(as_=principal, status=status, limit=limit)
    return [row.listed() for row in rows]


@router.get(
    "/approvals/{approval_id}",
    responses=problem_responses(401, 403, 404),  # 403: ?full=true without an operator
    summary="One approval: what it is bound to, its summary, its status",
)
async def get_approval(
    approval_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    full: Annotated[
        bool, Query(description="Include the full redacted arguments (operators only).")
    ] = False,
) -> dict[str, Any]:
    return await state.runtime.get_approval(approval_id, as_=principal, full=full)


async def _decide(
    approve: bool,
    approval_id: str,
    request: Request,
    body: DecisionRequest | None,
    state: ServerState,
) -> dict[str, Any]:
    body = body or DecisionRequest()
    token = credential_header(request.headers, APPROVAL_TOKEN_HEADER)
    if any(request.headers.getlist("authorization")) or not token:
        principal = principal_of(request)
        _one_tenant(principal.tenant, body.tenant, "the body's tenant is not yours")
        decided = await state.runtime.decide(
            approval_id, approve=approve, as_=principal, reason=body.reason
        )
    else:
        header = credential_header(request.headers, TENANT_HEADER)
        _one_tenant(header, body.tenant, f"{TENANT_HEADER} and the body's tenant differ")
        decided = await state.runtime.decide(
            approval_id,
            approve=approve,
            token=token,
            tenant=header or body.tenant,
            reason=body.reason,
        )
    return decided.listed()


def _one_tenant(given: str | None, body: str | None, why: str) -> None:
    """Two names for the tenant that disagree are refused, not resolved by precedence (a proxy
    or a log may read the other one)."""
    if given and body and given != body:
        raise InvalidInput(why, reason="TENANT_CONFLICT", details={"field": "tenant"})


DECISION_RESPONSES = problem_responses(401, 403, 404, 409, 422)


@router.post(
    "/approvals/{approval_id}/approve",
    responses=DECISION_RESPONSES,
    summary="Approve a pending call (operators or the approval token only)",
)
async def approve(
    approval_id: str,
    request: Request,
    state: Annotated[ServerState, Depends(get_state)],
    body: Annotated[DecisionRequest | None, Body()] = None,
) -> dict[str, Any]:
    return await _decide(True, approval_id, request, body, state)


@router.post(
    "/approvals/{approval_id}/reject",
    responses=DECISION_RESPONSES,
    summary="Reject a pending call; final for that call id",
)
async def reject(
    approval_id: str,
    request: Request,
    state: Annotated[ServerState, Depends(get_state)],
    body: Annotated[DecisionRequest | None, Body()] = None,
) -> dict[str, Any]:
    return await _decide(False, approval_id, request, body, state)
