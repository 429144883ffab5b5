"""``POST /v1/contexts`` and ``GET /v1/contexts/{id}``: resolve and read contexts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from charter.errors import PermissionDenied
from charter.kernel.contexts import ResolvedContext, tool_schemas
from charter.kernel.principals import Principal
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.schemas import ContextOut, ContextRequest, SchemaFormat
from charter.server.state import ServerState, get_principal, get_state

router = APIRouter(tags=["contexts"], route_class=JsonRoute)

FormatQuery = Annotated[SchemaFormat, Query(description="Tool schemas for this model provider.")]


def context_document(state: ServerState, ctx: ResolvedContext, fmt: str) -> dict[str, Any]:
    build = state.runtime.build
    contracts = [build.tools[t.id].contract for t in ctx.tools if t.id in build.tools]
    return {
        **ctx.payload(),
        "run_id": ctx.run_id,
        "created_at": ctx.created_at,
        "format": fmt,
        "tool_schemas": tool_schemas(contracts, fmt),
    }


@router.post(
    "/contexts",
    status_code=201,
    response_model=ContextOut,
    responses=problem_responses(400, 401, 403, 404, 422),
    summary="Resolve a context: the tools this principal may see and call",
)
async def resolve_context(
    body: ContextRequest,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    format: FormatQuery = "charter",
) -> dict[str, Any]:
    if body.run is not None:
        await state.check_run(body.run, principal)
    ctx = await state.runtime.resolve_context(
        principal,
        body.profile,
        agent=body.agent,
        objective=body.objective,
        attachments=[(a.kind, a.ref) for a in body.attachments],
        run_id=body.run,
    )
    return context_document(state, ctx, format)


@router.get(
    "/contexts/{context_id}",
    response_model=ContextOut,
    responses=problem_responses(401, 404, 422),
    summary="Read a context and its tool schemas",
)
async def get_context(
    context_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    format: FormatQuery = "charter",
) -> dict[str, Any]:
    ctx = await state.runtime.get_context(context_id, tenant=principal.tenant)
    if ctx is None:
        raise PermissionDenied("no such context", reason="CONTEXT_NOT_FOUND")
    return context_document(state, ctx, format)
