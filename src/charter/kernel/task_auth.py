"""Task-scoped authorization: what a call made inside a task of a catalog run may do.

The kernel calls :func:`task_check` for every call, at the "task" position of its
authorization order (after agent scope) and before the arguments are validated: a call into
a run of a catalog workflow must name a task of it (``TASK_REQUIRED`` otherwise), and a call
that names a task goes through :func:`task_denial`. The decision itself is the pure
function :func:`check_task_call`, over the run row, the task row, the pinned task contract,
the context and the number of calls already made in the task's current attempt:

    catalog run → run running → task running → role → profile → tool allowlist
    → handoff of this attempt → ``max_tool_calls`` → ``timeout_seconds``

The first failing rule denies with a specific reason. A task of an ad-hoc run (a chat's
delegated task) has no pinned contract: :func:`check_adhoc_task_call` applies its row's role
and profile and its handoff's capabilities and budgets instead. Budgets come from the
handoff bound to the attempt; the attempt's calls are the call rows of this task reserved
after that handoff. The count is read before the reservation, so two concurrent calls of one
task can both pass the last free slot (the exact, transactional count is the per-context
``call_limit``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from charter.kernel import task_rules as rules
from charter.kernel.authorize import Denial
from charter.kernel.contexts import ResolvedContext
from charter.kernel.store import KernelStore
from charter.ledger.views import CallRow, RunRow, TaskRow
from charter.project.catalog import TaskContract
from charter.project.pinning import pinned_entry


def _parse_at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def is_catalog_run(run: RunRow) -> bool:
    """A run of a catalog workflow: its ``run_created`` event pinned the workflow's contract."""
    return isinstance(run.workflow, Mapping) and "entries" in run.workflow


def _contract(run: RunRow, task_id: str) -> TaskContract | None:
    workflow = run.workflow
    if not isinstance(workflow, Mapping) or "entries" not in workflow:
        return None
    for t in pinned_entry(workflow).tasks:
        if t.id == task_id:
            return t
    return None


def attempt_calls(
    task: TaskRow,
    handoff: Mapping[str, Any] | None,
    calls: Sequence[CallRow],
    *,
    exclude: tuple[str, str] | None = None,
) -> int:
    """Calls of this task reserved after the handoff that bound the current attempt.

    ``exclude`` (context id, call id): a repeated call id answers with its recorded receipt,
    so it does not count against the budget it already used.
    """
    after = int(handoff["seq"]) if handoff is not None else 0
    return sum(
        1
        for c in calls
        if c.task_id == task.task_id
        and c.reserved_seq > after
        and (c.context_id, c.call_id) != exclude
    )


def check_task_call(
    *,
    run: RunRow | None,
    task: TaskRow | None,
    contract: TaskContract | None,
    context: ResolvedContext,
    tool_id: str,
    agents: frozenset[str],
    calls_in_attempt: int,
    now: datetime,
) -> Denial | None:
    """The first task rule the call breaks, or ``None``. Pure: no I/O."""
    if run is None or contract is None or task is None:
        return Denial(
            reason="TASK_NOT_FOUND",
            message="the context's run has no such task in its pinned workflow",
        )
    tid = contract.id
    if run.status != "running":
        return Denial(reason="RUN_NOT_RUNNING", message=f"the run is {run.status}")
    if task.status != "running":
        return Denial(
            reason="TASK_NOT_RUNNING", message=f"task {tid} is {task.status}, not running"
        )
    if contract.role in agents and context.agent != contract.role:
        return Denial(
            reason="TASK_ROLE_MISMATCH",
            message=f"task {tid} is for role {contract.role}, the context is for "
            f"{context.agent or 'no agent'}",
        )
    if context.profile != contract.profile:
        return Denial(
            reason="TASK_PROFILE_MISMATCH",
            message=f"task {tid} runs in profile {contract.profile}, the context in "
            f"{context.profile}",
        )
    if tool_id not in contract.required_tools:
        return Denial(
            reason="TASK_TOOL_NOT_ALLOWED",
            message=f"task {tid} may use {', '.join(contract.required_tools) or 'no tools'}",
        )
    return _handoff_rules(task, tid, None, now=now, calls_in_attempt=calls_in_attempt)


def check_adhoc_task_call(
    *,
    run: RunRow,
    task: TaskRow | None,
    context: ResolvedContext,
    tool_id: str,
    calls_in_attempt: int,
    now: datetime,
) -> Denial | None:
    """A task of an ad-hoc run (a chat's delegated task: docs/chat.md, "Handoffs"). No
    pinned contract: the task row's role and profile, and the tools its handoff named as
    capabilities, stand in for it; the handoff's budgets apply as in a catalog task."""
    if task is None:
        return Denial(reason="TASK_NOT_FOUND", message="the context's run has no such task")
    tid = task.task_id
    if run.status != "running":
        return Denial(reason="RUN_NOT_RUNNING", message=f"the run is {run.status}")
    if task.status != "running":
        return Denial(
            reason="TASK_NOT_RUNNING", message=f"task {tid} is {task.status}, not running"
        )
    if task.role and context.agent != task.role:
        return Denial(
            reason="TASK_ROLE_MISMATCH",
            message=f"task {tid} is for role {task.role}, the context is for "
            f"{context.agent or 'no agent'}",
        )
    if task.profile and context.profile != task.profile:
        return Denial(
            reason="TASK_PROFILE_MISMATCH",
            message=f"task {tid} runs in profile {task.profile}, the context in {context.profile}",
        )
    return _handoff_rules(task, tid, tool_id, now=now, calls_in_attempt=calls_in_attempt)


def _handoff_rules(
    task: TaskRow, tid: str, tool_id: str | None, *, now: datetime, calls_in_attempt: int
) -> Denial | None:
    """The attempt's handoff: bound, its capabilities (``tool_id`` given: an ad-hoc task),
    its tool-call and elapsed-time budgets."""
    handoff = rules.current_handoff(task)
    if handoff is None:
        return Denial(reason="HANDOFF_MISSING", message=f"task {tid} has no handoff bound")
    allowed = list(handoff.get("capabilities") or ())
    if tool_id is not None and tool_id not in allowed:
        return Denial(
            reason="TASK_TOOL_NOT_ALLOWED",
            message=f"task {tid} may use {', '.join(allowed) or 'no tools'}",
        )
    budget = handoff.get("budget") or {}
    max_calls = budget.get("max_tool_calls")
    if isinstance(max_calls, int) and calls_in_attempt >= max_calls:
        return Denial(
            reason="TASK_CALL_BUDGET_EXHAUSTED",
            message=f"task {tid} has used its {max_calls} tool calls for this attempt",
        )
    timeout = budget.get("timeout_seconds")
    started = task.updated_at
    if isinstance(timeout, int | float) and started:
        elapsed = (now - _parse_at(started)).total_seconds()
        if elapsed > timeout:
            return Denial(
                reason="TASK_TIMEOUT",
                message=f"task {tid} started {elapsed:.0f}s ago; its budget is {timeout}s",
            )
    return None


async def task_denial(
    store: KernelStore,
    context: ResolvedContext,
    tool_id: str,
    task_id: str,
    *,
    call_id: str,
    agents: frozenset[str],
    now: datetime,
) -> Denial | None:
    """Read the rows :func:`check_task_call` needs and decide."""
    run = await store.read_view(RunRow, context.run_id)
    task = await store.read_view(TaskRow, context.run_id, task_id)
    contract = _contract(run, task_id) if run is not None else None
    adhoc = run is not None and not (
        isinstance(run.workflow, Mapping) and "entries" in run.workflow
    )
    count = 0
    if task is not None and task.status == "running":
        calls = await store.list_views(CallRow, context.run_id)
        count = attempt_calls(
            task, rules.current_handoff(task), calls, exclude=(context.context_id, call_id)
        )
    if adhoc:
        assert run is not None
        return check_adhoc_task_call(
            run=run,
            task=task,
            context=context,
            tool_id=tool_id,
            calls_in_attempt=count,
            now=now,
        )
    return check_task_call(
        run=run,
        task=task,
        contract=contract,
        context=context,
        tool_id=tool_id,
        agents=agents,
        calls_in_attempt=count,
        now=now,
    )


async def task_check(
    store: KernelStore,
    context: ResolvedContext,
    tool_id: str,
    task_id: str | None,
    *,
    call_id: str,
    agents: frozenset[str],
    now: datetime,
    catalog_runs: dict[str, bool] | None = None,
) -> Denial | None:
    """The kernel's task step: every call into a catalog run names a running task of it
    (``TASK_REQUIRED``), and a call that names a task obeys that task's rules.
    ``catalog_runs`` remembers which runs are catalog runs (fixed when a run is created), so
    a call without a task reads its run once per process, not once per call."""
    if task_id is None:
        known = None if catalog_runs is None else catalog_runs.get(context.run_id)
        if known is False:
            return None
        run = await store.read_view(RunRow, context.run_id)
        if run is not None and catalog_runs is not None:
            if len(catalog_runs) > 10_000:
                catalog_runs.clear()
            catalog_runs[run.run_id] = is_catalog_run(run)
        if run is not None and is_catalog_run(run):
            return Denial(
                reason="TASK_REQUIRED",
                message=f"run {run.run_id} is a run of workflow {run.workflow_slug}: "
                "a call into it names one of its running tasks (task_id)",
            )
        return None
    return await task_denial(
        store, context, tool_id, task_id, call_id=call_id, agents=agents, now=now
    )
