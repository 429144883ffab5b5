"""``/v1/runs/{id}/tasks…`` and ``/v1/runs/{id}/finish``: drive a catalog run over HTTP.

List the tasks (each with its pinned contract), record a handoff, start and complete a task,
finish the run — through :class:`charter.workflows.control.RunControl`, so the same rules
hold as in Python and on the command line: any principal of the run's tenant reads; an
operator of the tenant or the run's creator drives (``RUN_CONTROL_DENIED`` otherwise);
another tenant's run is ``404 RUN_NOT_FOUND``. Cancelling, failing and skipping a task are
operators' endings (``POST …/tasks/{task}/cancel|fail|skip``, :mod:`.runs`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends

from charter.kernel.principals import Principal
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.state import ServerState, get_principal, get_state

router = APIRouter(tags=["runs"], route_class=JsonRoute)

Who = Annotated[Principal, Depends(get_principal)]
State = Annotated[ServerState, Depends(get_state)]


@router.get(
    "/runs/{run_id}/tasks",
    responses=problem_responses(401, 404, 422),
    summary="A catalog run's tasks, each with its pinned contract",
)
async def list_tasks(run_id: str, principal: Who, state: State) -> list[dict[str, Any]]:
    return await state.runtime.workflows.tasks(run_id, as_=principal)


@router.get(
    "/runs/{run_id}/tasks/{task_id}",
    responses=problem_responses(401, 404, 422),
    summary="One task of a catalog run, with its pinned contract and handoffs",
)
async def get_task(run_id: str, task_id: str, principal: Who, state: State) -> dict[str, Any]:
    return await state.runtime.workflows.task(run_id, task_id, as_=principal)


@router.post(
    "/runs/{run_id}/tasks/{task_id}/handoff",
    status_code=201,
    responses=problem_responses(401, 403, 404, 422),
    summary="Record the handoff that binds the task's next attempt (docs/workflows.md)",
)
async def record_handoff(
    run_id: str,
    task_id: str,
    handoff: Annotated[dict[str, Any], Body(description="The handoff object.")],
    principal: Who,
    state: State,
) -> dict[str, Any]:
    return await state.runtime.workflows.record_handoff(run_id, task_id, handoff, as_=principal)


@router.post(
    "/runs/{run_id}/tasks/{task_id}/start",
    responses=problem_responses(401, 403, 404, 422),
    summary="Start a task: dependencies completed, a handoff bound, inputs verified",
)
async def start_task(run_id: str, task_id: str, principal: Who, state: State) -> dict[str, Any]:
    return await state.runtime.workflows.start_task(run_id, task_id, as_=principal)


@router.post(
    "/runs/{run_id}/tasks/{task_id}/complete",
    responses=problem_responses(401, 403, 404, 422),
    summary="Complete a running task once every output it declares is registered",
)
async def complete_task(run_id: str, task_id: str, principal: Who, state: State) -> dict[str, Any]:
    return await state.runtime.workflows.complete_task(run_id, task_id, as_=principal)


@router.post(
    "/runs/{run_id}/finish",
    responses=problem_responses(401, 403, 404, 422),
    summary="Finish a catalog run: completed, or partial with its gaps",
)
async def finish_run(run_id: str, principal: Who, state: State) -> dict[str, Any]:
    return await state.runtime.workflows.finish_run(run_id, as_=principal)
