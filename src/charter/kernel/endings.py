"""Operators end runs and tasks: cancel or fail a run; cancel, fail or skip a task.

The transitions are the ChemSpace seed's (:mod:`charter.ledger.lifecycle`): any open run may
go ``cancelled`` or ``failed``; a task ``pending → cancelled | skipped``, ``running |
input_required → cancelled | failed``. Only an operator (a human principal) of the run's
tenant may, with a reason, which is recorded in the status event redacted and scrubbed of the
secret argument values of every call of the run (:mod:`charter.kernel.run_notes`).

A status change waits for the run's (or the task's) calls in flight: for up to ``settle_s``
seconds they may finish; a call still ``dispatching`` after that is recorded ``unknown``
(``ENDED_IN_FLIGHT``) — its effect may or may not happen, exactly as after a crash — so the
ledger's in-flight guard never refuses the change and no call is left ``dispatching``. Ending
a run also ends what waits inside it: its open tasks go ``cancelled``, its pending approvals
``rejected`` (their calls ``denied``) and approved-but-unused ones ``expired``, in the same
append as the run's own ``run_status_changed``. A later call in any context of the run is
denied (``RUN_ENDED``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from charter.contracts.canonical import Fingerprinter
from charter.contracts.text import MAX_REASON, bounded, shown
from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.delegation import delegates
from charter.kernel.executor_port import ToolThreadUse
from charter.kernel.principals import Principal
from charter.kernel.redaction import Redactor
from charter.kernel.run_notes import scrub_run_note
from charter.kernel.store import KernelStore
from charter.ledger import lifecycle
from charter.ledger.events import NewEvent
from charter.ledger.projections import Row, run_key, task_key
from charter.ledger.views import ApprovalRow, CallRow, TaskRow

RUN_ENDINGS = ("cancelled", "failed")
TASK_ENDINGS = ("cancelled", "failed", "skipped")
_OPEN_TASK = frozenset({"pending", "running", "input_required"})


def in_flight_unknown(call: CallRow, reason: str, message: str) -> NewEvent:
    """The ``unknown`` outcome of a call nobody will finish (its effect may have happened);
    a delegating call, which has no effect of its own, is ``abandoned`` instead."""
    stage = "abandoned" if delegates(call) else "unknown"
    if stage == "abandoned":
        message = "the delegating call was ended; each call it made is recorded on its own"
    receipt: dict[str, Any] = {
        "status": stage,
        "data": None,
        "error": {"code": "internal", "reason": reason, "message": message, "retryable": False},
        "warnings": [],
        "artifact_ids": [],
        "output_bytes": 0,
        "attempts": call.attempts,
    }
    return NewEvent(
        type="tool_progress",
        payload={
            "stage": stage,
            "context_id": call.context_id,
            "call_id": call.call_id,
            "receipt": receipt,
            "reason": reason,
        },
    )


class RunEndings:
    def __init__(
        self,
        *,
        store: KernelStore,
        redactor: Redactor,
        fingerprinter: Fingerprinter,
        settle_s: float = 10.0,
    ):
        self.store = store
        self.redactor = redactor
        self.fingerprinter = fingerprinter
        self.settle_s = settle_s

    @classmethod
    def of(cls, state: Any) -> RunEndings:
        """The endings of a kernel's state (its store, redactor and fingerprint key)."""
        return cls(store=state.store, redactor=state.redactor, fingerprinter=state.fingerprinter)

    async def end_run(
        self, run_id: str, status: str, *, reason: str, operator: Principal
    ) -> dict[str, Any]:
        """Cancel or fail an open run (see the module docstring); returns the run row."""
        if status not in RUN_ENDINGS:
            raise InvalidInput("a run ends cancelled or failed", reason="RUN_ENDING_INVALID")
        self._check(operator, reason)
        run = await self._run(run_id, operator)
        note = await self._note(run_id, reason)
        target = lifecycle.parse_run_status(status)
        error = _error(note) if status == "failed" else None
        lifecycle.check_run_transition(lifecycle.parse_run_status(run["status"]), target, error)
        for _ in range(3):
            await self._settle(run_id, None)
            entries = await self._closing(run_id, operator, note)
            payload: dict[str, Any] = {"status": status, "by": operator.name, "reason": note}
            if error is not None:
                payload["error"] = error
            entries.append(NewEvent(type="run_status_changed", payload=payload))
            try:
                await self.store.append(run_id, entries)
            except InvalidInput as exc:
                if exc.reason in ("CALL_IN_FLIGHT", "APPROVAL_NOT_PENDING", "ILLEGAL_TRANSITION"):
                    continue  # a call started or something was decided meanwhile: look again
                raise
            break
        else:
            raise InvalidInput(
                "the run kept changing while it was being ended; try again",
                reason="RUN_BUSY",
                run_id=run_id,
            )
        ended = await self.store.get_row(run_key(run_id))
        assert ended is not None
        return dict(ended)

    async def end_task(
        self, run_id: str, task_id: str, status: str, *, reason: str, operator: Principal
    ) -> dict[str, Any]:
        """Cancel, fail or skip a task of an open run; returns the task row."""
        if status not in TASK_ENDINGS:
            raise InvalidInput(
                "a task ends cancelled, failed or skipped", reason="TASK_ENDING_INVALID"
            )
        self._check(operator, reason)
        run = await self._run(run_id, operator)
        note = await self._note(run_id, reason)
        lifecycle.ensure_run_open(lifecycle.parse_run_status(run["status"]))
        task = await self.store.get_row(task_key(run_id, task_id))
        if task is None:
            raise PermissionDenied(
                f"no task {shown(task_id)} in run {run_id}", reason="TASK_NOT_FOUND"
            )
        error = _error(note) if status == "failed" else None
        lifecycle.check_task_transition(
            lifecycle.parse_task_status(task["status"]), lifecycle.parse_task_status(status), error
        )
        payload: dict[str, Any] = {
            "task_id": task_id,
            "status": status,
            "by": operator.name,
            "reason": note,
        }
        if error is not None:
            payload["error"] = error
        for _ in range(3):
            await self._settle(run_id, task_id)
            try:
                await self.store.append(
                    run_id, [NewEvent(type="task_status_changed", payload=payload)]
                )
            except InvalidInput as exc:
                if exc.reason == "CALL_IN_FLIGHT":
                    continue
                raise
            break
        else:
            raise InvalidInput(
                "the task kept starting calls while it was being ended; try again",
                reason="TASK_BUSY",
                run_id=run_id,
            )
        ended = await self.store.get_row(task_key(run_id, task_id))
        assert ended is not None
        return dict(ended)

    # -----------------------------------------------------------------------------------

    def _check(self, operator: Principal, reason: str) -> None:
        if not operator.is_operator:
            raise PermissionDenied(
                "only an operator may end a run or a task", reason="ENDER_NOT_HUMAN"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInput("a reason is required", reason="REASON_REQUIRED")
        bounded(reason, field="reason", limit=MAX_REASON, reason="REASON_TOO_LONG")

    async def _note(self, run_id: str, reason: str) -> str:
        """The reason as recorded: redacted, and scrubbed of the secret argument values of
        every call of the run (:mod:`charter.kernel.run_notes`)."""
        return await scrub_run_note(
            reason.strip(),
            run_id=run_id,
            store=self.store,
            fingerprinter=self.fingerprinter,
            redactor=self.redactor,
        )

    async def _run(self, run_id: str, operator: Principal) -> Row:
        run = await self.store.get_row(run_key(run_id))
        if run is None or run.get("tenant") != operator.tenant:
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND")
        return run

    async def _in_flight(self, run_id: str, task_id: str | None) -> list[CallRow]:
        calls = await self.store.find_views(
            CallRow, run_id=run_id, state="dispatching", limit=10_000
        )
        return [c for c in calls if task_id is None or c.task_id == task_id]

    async def _settle(self, run_id: str, task_id: str | None) -> None:
        """Wait up to ``settle_s`` for calls in flight; record the rest ``unknown`` (a
        delegating call is not waited for: the calls it makes are; it ends ``abandoned``)."""
        deadline = time.monotonic() + self.settle_s
        flying = await self._in_flight(run_id, task_id)
        while (
            any(not delegates(c) for c in flying) and (remaining := deadline - time.monotonic()) > 0
        ):
            head = await self.store.head(run_id)
            await self.store.wait_for_events(
                run_id, after=head.seq if head else 0, timeout=min(remaining, 0.5)
            )
            flying = await self._in_flight(run_id, task_id)
        for call in flying:
            event = in_flight_unknown(
                call,
                "ENDED_IN_FLIGHT",
                "an operator ended the run or task while this call was in flight; its effect "
                "may or may not have happened",
            )
            try:
                await self.store.append(run_id, [event])
            except InvalidInput:
                continue  # its outcome arrived meanwhile

    async def _closing(self, run_id: str, operator: Principal, note: str) -> list[NewEvent]:
        """What ends with the run: open tasks, pending and approved approvals."""
        entries: list[NewEvent] = []
        for task in await self.store.find_views(TaskRow, run_id=run_id, limit=10_000):
            if task.status in _OPEN_TASK:
                entries.append(
                    NewEvent(
                        type="task_status_changed",
                        payload={
                            "task_id": task.task_id,
                            "status": "cancelled",
                            "by": operator.name,
                            "reason": note,
                        },
                    )
                )
        for status, kind in (("pending", "approval_rejected"), ("approved", "approval_expired")):
            approvals = await self.store.find_views(
                ApprovalRow, run_id=run_id, status=status, limit=10_000
            )
            entries += [
                NewEvent(
                    type=kind,
                    payload={
                        "approval_id": a.approval_id,
                        "context_id": a.context_id,
                        "call_id": a.call_id,
                        "actor": operator.name,
                        "reason": f"the run was ended: {note}",
                    },
                )
                for a in approvals
            ]
        return entries


def _error(note: str) -> dict[str, Any]:
    return {
        "code": "internal",
        "message": f"an operator failed it: {note}",
        "retryable": False,
        "details": {"reason": "OPERATOR_FAILED"},
    }


class RunOperations:
    """What operators do to runs and tasks, and the upkeep, as the runtime offers them: the
    principal is named (``as_``) and resolved by the runtime's deployment."""

    def __init__(self, kernel: Any, principal: Callable[[Any], Principal]) -> None:
        self.kernel = kernel
        self.principal = principal

    async def end_run(self, run_id: str, status: str, *, reason: str, as_: Any) -> dict[str, Any]:
        """Cancel (``status="cancelled"``) or fail (``"failed"``) a run; returns its row."""
        return dict(await self.kernel.end_run(run_id, status, reason, self.principal(as_)))

    async def end_task(
        self, run_id: str, task_id: str, status: str, *, reason: str, as_: Any
    ) -> dict[str, Any]:
        """Cancel, fail or skip a task; returns its row."""
        return dict(
            await self.kernel.end_task(run_id, task_id, status, reason, self.principal(as_))
        )

    async def maintain(self) -> dict[str, int]:
        """One round of upkeep, as ``charter serve`` runs it (see ``Kernel.maintain``)."""
        counts: dict[str, int] = await self.kernel.maintain()
        return counts

    def tool_threads(self) -> ToolThreadUse | None:
        """This process's sync-tool threads (None: no executor here runs sync tools)."""
        for executor in self.kernel.executors.values():
            use = getattr(executor, "tool_threads", None)
            if use is not None:
                found: ToolThreadUse = use()
                return found
        return None
