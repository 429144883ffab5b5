"""Runs of catalog workflows: creation with a pinned contract, tasks, handoffs, completion.

The decisions are the pure functions of :mod:`charter.workflows.handoff` and
:mod:`charter.kernel.task_rules`; this module reads the run, task and artifact rows as typed
views, verifies artifact checksums
through an :class:`~charter.artifacts.service.ArtifactService` (when one is given) and appends
the events. Ad-hoc runs (chats, MCP sessions) never pass through here.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from charter.artifacts.names import normal_path
from charter.artifacts.records import MEDIA_TYPE, Producer, StoredObject, Trust
from charter.artifacts.service import ArtifactService
from charter.contracts.text import shown
from charter.errors import Failure, InvalidInput, PermissionDenied
from charter.kernel import task_rules as rules
from charter.kernel.store import KernelStore
from charter.ledger.events import NewEvent
from charter.ledger.ids import new_id
from charter.ledger.trust import LedgerTrust, RunLedgerInvalid, RunProblem
from charter.ledger.views import ArtifactRow, RunRow, TaskRow
from charter.project.build import Build
from charter.project.catalog import TaskContract
from charter.project.pinning import pin, pinned_entry
from charter.workflows.handoff import OPTIONAL, validate_handoff


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInput:
    """A file given at run creation for one of the workflow's ``input_artifacts`` types."""

    type: str
    path: str  # run-relative destination
    data: bytes
    media_type: str = "application/octet-stream"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnd:
    status: str
    gaps: tuple[str, ...]


class WorkflowRuns:
    def __init__(
        self,
        *,
        build: Build,
        store: KernelStore,
        artifacts: ArtifactService | None = None,
        hex_source: Any = secrets.token_hex,
        redact: Callable[[Any], Any] | None = None,
    ) -> None:
        self.build = build
        self.store = store
        self.artifacts = artifacts
        self._hex = hex_source
        # the deployment redactor's: a handoff's free text is recorded redacted
        self.redact = redact

    # -- reading -----------------------------------------------------------------------

    async def run(self, run_id: str, *, tenant: str | None = None) -> RunRow:
        row = await self.store.read_view(RunRow, run_id)
        if row is None or (tenant is not None and row.tenant != tenant):
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND")
        return row

    async def tasks(self, run_id: str) -> dict[str, TaskRow]:
        rows = await self.store.find_views(TaskRow, run_id=run_id, limit=10_000)
        return {r.task_id: r for r in rows}

    async def contract_rows(self, run: RunRow) -> dict[str, TaskRow]:
        """The rows of every task the run's pinned workflow names; one of them missing is
        ledger damage (the run's first append created them all), never a task to skip."""
        rows = await self.tasks(run.run_id)
        for t in self.contract_tasks(run):
            if t.id not in rows:
                raise self.row_gone(run.run_id, t.id)
        return rows

    def row_gone(self, run_id: str, task_id: str) -> RunLedgerInvalid:
        """The refusal of a run whose row of a pinned task is gone (deleted outside Charter):
        the store's trust refuses the run from then on, as for any damage it finds."""
        problem = RunProblem(
            run_id=run_id,
            reason="SNAPSHOT_DIVERGENCE",
            seq=None,
            message=f"the tasks row of task {task_id!r}, which the pinned workflow names, "
            "is gone (deleted outside Charter)",
        )
        trust = getattr(self.store, "trust", None)
        return trust.fail(problem) if isinstance(trust, LedgerTrust) else RunLedgerInvalid(problem)

    async def artifact_rows(self, run_id: str) -> list[ArtifactRow]:
        return await self.store.find_views(ArtifactRow, run_id=run_id, limit=100_000)

    @staticmethod
    def contract(run: RunRow, task_id: str) -> TaskContract:
        workflow = run.workflow
        if not isinstance(workflow, Mapping) or "entries" not in workflow:
            raise InvalidInput("this run has no catalog workflow", reason="RUN_HAS_NO_TASKS")
        for t in pinned_entry(workflow).tasks:
            if t.id == task_id:
                return t
        raise PermissionDenied(
            f"no task {shown(task_id)} in the pinned workflow", reason="TASK_NOT_FOUND"
        )

    @staticmethod
    def contract_tasks(run: RunRow) -> tuple[TaskContract, ...]:
        """The pinned workflow's task contracts, in the catalog's order."""
        workflow = run.workflow
        if not isinstance(workflow, Mapping) or "entries" not in workflow:
            raise InvalidInput("this run has no catalog workflow", reason="RUN_HAS_NO_TASKS")
        return tuple(pinned_entry(workflow).tasks)

    async def task_row(self, run: RunRow, task_id: str) -> TaskRow:
        """The row of a task of the pinned workflow (``TASK_NOT_FOUND`` for one it does not
        name; ledger damage when its row is gone)."""
        self.contract(run, task_id)
        row = await self.store.read_view(TaskRow, run.run_id, task_id)
        if row is None:
            raise self.row_gone(run.run_id, task_id)
        return row

    async def _verify(self, run_id: str, artifact_ids: Sequence[str]) -> None:
        if self.artifacts is None:
            return
        for aid in artifact_ids:
            await self.artifacts.verify(run_id, aid)

    # -- writing -----------------------------------------------------------------------

    async def create_run(
        self,
        slug: str,
        *,
        principal: str,
        tenant: str,
        session_id: str | None = None,
        inputs: Sequence[RunInput] = (),
    ) -> str:
        """Create the run with its pinned contract and tasks; register the inputs; run it."""
        pinned = pin(self.build.document, slug)
        entry = pinned_entry(pinned)
        given = [i.type for i in inputs]
        if sorted(given) != sorted(entry.input_artifacts):
            raise InvalidInput(
                f"workflow {slug} takes inputs {sorted(entry.input_artifacts)}, given {given}",
                reason="RUN_INPUTS_MISMATCH",
            )
        if inputs and self.artifacts is None:
            raise InvalidInput("input artifacts need an artifact store", reason="NO_ARTIFACTS")
        inputs = self._checked_inputs(inputs)  # refused before anything is recorded
        run_id = new_id(slug, hex_source=self._hex)
        events = [
            NewEvent(
                type="run_created",
                payload={
                    "session_id": session_id or run_id,
                    "workflow_slug": slug,
                    "tenant": tenant,
                    "created_by": principal,
                    "workflow": pinned,
                },
            ),
            NewEvent(type="run_status_changed", payload={"status": "planning"}),
        ]
        for t in entry.tasks:
            events.append(
                NewEvent(
                    type="task_created",
                    payload={
                        "task_id": t.id,
                        "role": t.role,
                        "profile": t.profile,
                        "title": t.title or t.id,
                        "depends_on": list(t.depends_on),
                    },
                )
            )
        await self.store.append(run_id, events)
        await self._register_inputs(run_id, inputs)
        await self.store.append(
            run_id, [NewEvent(type="run_status_changed", payload={"status": "running"})]
        )
        return run_id

    def _checked_inputs(self, inputs: Sequence[RunInput]) -> list[RunInput]:
        """The inputs with their paths and media types normalised; what the artifact store
        or the registration would refuse is refused here, naming the input, before the run
        exists (a refusal after its first events would leave it in ``planning``)."""
        out: list[RunInput] = []
        seen: dict[str, str] = {}
        for item in inputs:
            try:
                path = normal_path(item.path)
                if self.artifacts is not None:
                    self.artifacts.check_name(path)
            except Failure as exc:
                raise InvalidInput(
                    f"input {item.type}: {exc.message}",
                    reason=exc.reason,
                    details={"input": item.type, "field": "path"},
                ) from None
            media_type = item.media_type.strip().lower()
            if MEDIA_TYPE.fullmatch(media_type) is None:
                raise InvalidInput(
                    f"input {item.type}: media_type must be type/subtype (lower case, at most "
                    "four simple parameters)",
                    reason="ARTIFACT_MEDIA_TYPE_INVALID",
                    details={"input": item.type, "field": "media_type"},
                )
            folded = path.casefold()
            if folded in seen:
                raise InvalidInput(
                    f"inputs {seen[folded]} and {item.type} name the same path",
                    reason="RUN_INPUT_INVALID",
                    details={"input": item.type, "field": "path"},
                )
            seen[folded] = item.type
            out.append(RunInput(type=item.type, path=path, data=item.data, media_type=media_type))
        return out

    async def _register_inputs(self, run_id: str, inputs: Sequence[RunInput]) -> None:
        """Write and register the inputs; if the store fails part-way (a full disk, a
        quota), the files not registered are removed and the run fails with the reason —
        never left in ``planning``."""
        if not inputs:
            return
        assert self.artifacts is not None
        written: list[StoredObject] = []
        try:
            for item in inputs:
                stored = await self.artifacts.write_bytes(run_id, item.path, item.data)
                written.append(stored)
                await self.artifacts.register(
                    run_id,
                    stored,
                    type=item.type,
                    media_type=item.media_type,
                    producer=Producer(),
                    trust=Trust.UNTRUSTED,
                )
        except Failure as exc:
            error = {
                "code": exc.code.value,
                "message": f"the run's inputs could not be stored ({exc.reason})",
                "retryable": exc.retryable,
                "details": {"reason": exc.reason},
            }
            await self.store.append(
                run_id,
                [NewEvent(type="run_status_changed", payload={"status": "failed", "error": error})],
            )
            with contextlib.suppress(Failure):  # best effort: a file left is never registered
                await self.artifacts.rollback(run_id, written)
            raise

    async def record_handoff(self, run_id: str, task_id: str, handoff: Mapping[str, Any]) -> str:
        run = await self.run(run_id)
        contract = self.contract(run, task_id)
        task = (await self.contract_rows(run))[task_id]
        if task.status == "running":
            # The running attempt keeps the handoff it started with (its budgets included).
            raise InvalidInput(
                f"task {task_id} is running; a handoff binds the next attempt",
                reason="TASK_RUNNING",
            )
        artifacts = {a.artifact_id: a for a in await self.artifact_rows(run_id)}
        normalised = validate_handoff(handoff, contract, artifacts)
        if self.redact is not None:  # the client's own text (docs/privacy.md)
            for name in ("objective", "constraints", *OPTIONAL):
                if name in normalised:
                    normalised[name] = self.redact(normalised[name])
        await self._verify(run_id, normalised["input_artifact_ids"])
        handoff_id = new_id("handoff", hex_source=self._hex)
        await self.store.append(
            run_id,
            [
                NewEvent(
                    type="handoff_recorded",
                    payload={"task_id": task_id, "handoff_id": handoff_id, **normalised},
                )
            ],
        )
        return handoff_id

    async def start_task(self, run_id: str, task_id: str) -> None:
        run = await self.run(run_id)
        self.contract(run, task_id)
        tasks = await self.contract_rows(run)
        handoff = rules.check_start(run, tasks[task_id], tasks)
        await self._verify(run_id, handoff.get("input_artifact_ids", []))
        await self.store.append(
            run_id,
            [
                NewEvent(
                    type="task_status_changed",
                    payload={
                        "task_id": task_id,
                        "status": "running",
                        "handoff_id": handoff["handoff_id"],
                    },
                )
            ],
        )

    async def complete_task(self, run_id: str, task_id: str) -> None:
        run = await self.run(run_id)
        contract = self.contract(run, task_id)
        task = (await self.contract_rows(run))[task_id]
        artifacts = await self.artifact_rows(run_id)
        rules.check_complete(contract, task, artifacts)
        mine = [a.artifact_id for a in artifacts if a.producer.get("task_id") == task_id]
        await self._verify(run_id, mine)
        await self.store.append(
            run_id,
            [
                NewEvent(
                    type="task_status_changed", payload={"task_id": task_id, "status": "completed"}
                )
            ],
        )

    async def fail_task(self, run_id: str, task_id: str, message: str) -> None:
        error = {"code": "internal", "message": message, "retryable": True, "details": {}}
        await self.store.append(
            run_id,
            [
                NewEvent(
                    type="task_status_changed",
                    payload={"task_id": task_id, "status": "failed", "error": error},
                )
            ],
        )

    async def finish_run(self, run_id: str) -> RunEnd:
        """``completed`` when every contract is satisfied, else ``partial`` with the gaps."""
        run = await self.run(run_id)
        workflow = run.workflow
        if not isinstance(workflow, Mapping) or "entries" not in workflow:
            raise InvalidInput("this run has no catalog workflow", reason="RUN_HAS_NO_TASKS")
        entry = pinned_entry(workflow).to_dict()
        tasks = await self.contract_rows(run)
        gaps = rules.run_gaps(entry, tasks, await self.artifact_rows(run_id))
        status = "partial" if gaps else "completed"
        await self.store.append(
            run_id,
            [NewEvent(type="run_status_changed", payload={"status": status, "gaps": gaps})],
        )
        return RunEnd(status=status, gaps=tuple(gaps))
