"""Phase 2 after validation, in the Elsa seed's order, with the task rules last.

:func:`authorization` runs the chain of :mod:`charter.kernel.authorize` (tenant, RBAC,
ownership hooks under their deadline, danger, enablement, agent scope) and then
:func:`task_rules` — the ``task`` position of :data:`~charter.kernel.authorize.ORDER`. The
first denial answers; the phase it came from is returned with it (observe mode records both).
"""

from __future__ import annotations

from charter.kernel.authorize import (
    AFTER_VALIDATION,
    BEFORE_VALIDATION,
    FINAL,
    AuthorizationInput,
    Denial,
    run_chain,
)
from charter.kernel.contexts import ResolvedContext
from charter.kernel.core import Attempt, KernelState
from charter.kernel.policy_deadline import authorize_with_deadline
from charter.kernel.task_auth import task_check

# The chain without ownership hooks: all of it, or (``disclosed``) past the part before
# validation (see authorize_with_deadline).
WITHOUT_OWNERSHIP = (*BEFORE_VALIDATION, *AFTER_VALIDATION, *FINAL)
AFTER_OWNERSHIP = (*AFTER_VALIDATION, *FINAL)


async def task_rules(
    state: KernelState, ctx: ResolvedContext, tool_id: str, task_id: str | None, call_id: str
) -> Denial | None:
    """The task position of the order (after agent scope): inside a task of a catalog run,
    its role, profile, tool allowlist and budgets; a call into a catalog run names a running
    task (``TASK_REQUIRED``, :func:`~charter.kernel.task_auth.task_check`)."""
    return await task_check(
        state.store,
        ctx,
        tool_id,
        task_id,
        call_id=call_id,
        agents=frozenset(state.build.agents),
        now=state.now(),
        catalog_runs=state.catalog_runs,
    )


async def authorization(
    state: KernelState, at: Attempt, inp: AuthorizationInput, *, disclosed: bool = False
) -> tuple[str, Denial] | None:
    """The first denial of the ordered chain and then the task rules, with its phase.
    ``disclosed``: the part before validation passed for ``inp`` (it is not run again)."""
    full = inp.with_arguments(at.arguments)
    if state.ownership_hooks:
        denial = await authorize_with_deadline(
            full,
            ownership=state.ownership_hooks,
            deadline_s=state.settings.policy_hook_deadline_s,
            disclosed=disclosed,
        )
    else:  # no hook to await: the same chain, without a coroutine
        denial = run_chain(full, AFTER_OWNERSHIP if disclosed else WITHOUT_OWNERSHIP)
    if denial is not None:
        return "authorization", denial
    if at.task_id is None and state.catalog_runs.get(at.ctx.run_id) is False:
        return None  # a run known not to be a catalog run: no task, no rules (as task_check)
    contract = at.bound()
    denial = await task_rules(state, at.ctx, contract.id, at.task_id, at.call_id)
    if denial is not None:
        return "task", denial
    return None
