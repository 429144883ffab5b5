"""Driving a catalog run from any surface: its tasks, their handoffs, starts, completions,
and finishing the run — one implementation that ``Runtime.workflows`` offers and the HTTP
API, the CLI and the MCP gateway call.

Who may do what (``docs/workflows.md``, "Who drives a run"):

- **read** the tasks of a run: any principal of the run's tenant;
- **record a handoff, start or complete a task, finish the run**: an operator of the run's
  tenant, or the principal that created the run (its owner — usually the application acting
  for the person it serves); anyone else of the tenant is refused ``permission_denied`` /
  ``RUN_CONTROL_DENIED``;
- **cancel, fail or skip a task**: operators only (``charter.kernel.endings``,
  ``ENDER_NOT_HUMAN``).

A run of another tenant answers as a missing one (``RUN_NOT_FOUND``) on every operation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from charter.errors import PermissionDenied
from charter.kernel.principals import Principal, PrincipalKind
from charter.ledger.views import RunRow
from charter.workflows.entry import create_catalog_run
from charter.workflows.service import RunInput, WorkflowRuns

if TYPE_CHECKING:
    from charter.runtime import Runtime

TASK_ENDINGS = {"cancel": "cancelled", "fail": "failed", "skip": "skipped"}


def may_drive(principal: Principal, run: RunRow, created_by: str | None) -> bool:
    """An operator of the run's tenant, or the principal that created the run."""
    if principal.tenant != run.tenant:
        return False
    return principal.kind is PrincipalKind.OPERATOR or created_by == principal.name


def handoff_template(
    task: Mapping[str, Any],
    *,
    sender_role: str,
    inputs: Mapping[str, str],
    objective: str | None = None,
    constraints: Sequence[str] = (),
    max_tool_calls: int = 10,
    timeout_seconds: int = 600,
    max_tokens: int = 4000,
) -> dict[str, Any]:
    """A handoff for a listed task (``tasks`` entry with its ``contract``): capabilities,
    expected outputs and criteria from the pinned contract, inputs by artifact id, and a
    budget (every handoff carries one)."""
    contract = task["contract"]
    budget = {
        "max_tokens": max_tokens,
        "max_tool_calls": max_tool_calls,
        "timeout_seconds": timeout_seconds,
    }
    body: dict[str, Any] = {
        "objective": objective or contract.get("title") or contract["id"],
        "sender_role": sender_role,
        "receiver_role": contract["role"],
        "constraints": list(constraints),
        "acceptance_criteria": list(contract["acceptance_criteria"]),
        "input_artifact_ids": [inputs[t] for t in contract["input_artifacts"] if t in inputs],
        "expected_outputs": list(contract["output_artifacts"]),
        "capabilities": list(contract["required_tools"]),
        "budget": budget,
    }
    return body


class RunControl:
    """Catalog runs as one principal drives them (``as_``: a deployment name or an
    authenticated :class:`Principal`)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _service(self) -> WorkflowRuns:
        rt = self.runtime
        return WorkflowRuns(
            build=rt.build, store=rt.store, artifacts=rt.artifacts, redact=rt.redactor.redact
        )

    async def _run(self, run_id: str, who: Principal, *, drive: bool) -> RunRow:
        run = await self.runtime.run(run_id)
        if run is None or run.tenant != who.tenant:
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
        if drive and not may_drive(who, run, await self._owner(run_id)):
            raise PermissionDenied(
                "only an operator or the principal that created the run may drive its tasks",
                reason="RUN_CONTROL_DENIED",
                run_id=run_id,
            )
        return run

    async def _owner(self, run_id: str) -> str | None:
        """Who created the run: its first event says (the run row does not keep it)."""
        first = await self.runtime.events(run_id, after=0, limit=1)
        owner = first[0].payload.get("created_by") if first else None
        return owner if isinstance(owner, str) else None

    async def create_run(
        self,
        workflow: str,
        *,
        as_: str | Principal,
        inputs: Sequence[RunInput] = (),
        session_id: str | None = None,
    ) -> str:
        """A run of a catalog workflow owned by ``as_`` (docs/workflows.md)."""
        who = self.runtime.principal(as_)
        return await create_catalog_run(self.runtime, who, workflow, inputs, session_id=session_id)

    async def tasks(self, run_id: str, *, as_: str | Principal) -> list[dict[str, Any]]:
        """The run's tasks (rows) with their pinned ``contract``, in the catalog's order."""
        run = await self._run(run_id, self.runtime.principal(as_), drive=False)
        rows = await self._service().contract_rows(run)
        return [
            {**rows[c.id].to_dict(), "contract": c.to_dict()}
            for c in WorkflowRuns.contract_tasks(run)
        ]

    async def task(self, run_id: str, task_id: str, *, as_: str | Principal) -> dict[str, Any]:
        run = await self._run(run_id, self.runtime.principal(as_), drive=False)
        contract = WorkflowRuns.contract(run, task_id)
        row = await self._service().task_row(run, task_id)
        return {**row.to_dict(), "contract": contract.to_dict()}

    async def record_handoff(
        self, run_id: str, task_id: str, handoff: Mapping[str, Any], *, as_: str | Principal
    ) -> dict[str, Any]:
        """Validate and record a handoff binding the task's next attempt; the task's row
        with ``handoff_id``."""
        who = self.runtime.principal(as_)
        await self._run(run_id, who, drive=True)
        handoff_id = await self._service().record_handoff(run_id, task_id, handoff)
        return {**await self.task(run_id, task_id, as_=who), "handoff_id": handoff_id}

    async def start_task(
        self, run_id: str, task_id: str, *, as_: str | Principal
    ) -> dict[str, Any]:
        who = self.runtime.principal(as_)
        await self._run(run_id, who, drive=True)
        await self._service().start_task(run_id, task_id)
        return await self.task(run_id, task_id, as_=who)

    async def complete_task(
        self, run_id: str, task_id: str, *, as_: str | Principal
    ) -> dict[str, Any]:
        who = self.runtime.principal(as_)
        await self._run(run_id, who, drive=True)
        await self._service().complete_task(run_id, task_id)
        return await self.task(run_id, task_id, as_=who)

    async def end_task(
        self, run_id: str, task_id: str, action: str, *, reason: str, as_: str | Principal
    ) -> dict[str, Any]:
        """``cancel``, ``fail`` or ``skip`` a task: operators only (kernel.endings)."""
        who = self.runtime.principal(as_)
        await self._run(run_id, who, drive=False)
        status = TASK_ENDINGS.get(action, action)
        return await self.runtime.operations.end_task(
            run_id, task_id, status, reason=reason, as_=who
        )

    async def finish_run(self, run_id: str, *, as_: str | Principal) -> dict[str, Any]:
        """``completed`` when every task completed and every output is registered, else
        ``partial`` with its ``gaps``."""
        who = self.runtime.principal(as_)
        await self._run(run_id, who, drive=True)
        end = await self._service().finish_run(run_id)
        return {"run_id": run_id, "status": end.status, "gaps": list(end.gaps)}
