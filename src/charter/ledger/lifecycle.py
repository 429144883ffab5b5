"""Run and task lifecycles: transition tables and guards, as pure functions without I/O.

Appends (live) and verification (replay) share these, so a ledger that the live code would
have refused also fails verification.

Runs (ChemSpace seed)::

    submitted → planning → running ⇄ input_required → completed | partial | failed | cancelled

Any non-terminal run may also fail or be cancelled. Tasks::

    pending → running ⇄ input_required → completed | failed | cancelled | skipped
    failed → running            (a retry; entering running counts an attempt)

Guards: a transition to ``failed`` must carry a structured error ``{code, message, retryable,
details}`` and no other transition may carry one; a terminal run accepts no further state
change; no run or task status change while one of its domain tool calls is in flight
(:class:`InFlightCalls` is the hook the kernel's call table implements).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

from charter.errors import ErrorCode, InvalidInput


class RunStatus(StrEnum):
    SUBMITTED = "submitted"
    PLANNING = "planning"
    RUNNING = "running"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


R, T = RunStatus, TaskStatus

RUN_TRANSITIONS: Mapping[RunStatus, frozenset[RunStatus]] = {
    R.SUBMITTED: frozenset({R.PLANNING, R.FAILED, R.CANCELLED}),
    R.PLANNING: frozenset({R.RUNNING, R.FAILED, R.CANCELLED}),
    R.RUNNING: frozenset({R.INPUT_REQUIRED, R.COMPLETED, R.PARTIAL, R.FAILED, R.CANCELLED}),
    R.INPUT_REQUIRED: frozenset({R.RUNNING, R.FAILED, R.CANCELLED}),
    R.COMPLETED: frozenset(),
    R.PARTIAL: frozenset(),
    R.FAILED: frozenset(),
    R.CANCELLED: frozenset(),
}
RUN_TERMINAL: frozenset[RunStatus] = frozenset(s for s, nxt in RUN_TRANSITIONS.items() if not nxt)

TASK_TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = {
    T.PENDING: frozenset({T.RUNNING, T.CANCELLED, T.SKIPPED}),
    T.RUNNING: frozenset({T.INPUT_REQUIRED, T.COMPLETED, T.FAILED, T.CANCELLED}),
    T.INPUT_REQUIRED: frozenset({T.RUNNING, T.FAILED, T.CANCELLED}),
    T.FAILED: frozenset({T.RUNNING}),
    T.COMPLETED: frozenset(),
    T.CANCELLED: frozenset(),
    T.SKIPPED: frozenset(),
}
TASK_TERMINAL: frozenset[TaskStatus] = frozenset({T.COMPLETED, T.CANCELLED, T.SKIPPED})
"""Task states nothing leaves (``failed`` is left only by a retry)."""

_ERROR_KEYS = frozenset({"code", "message", "retryable", "details"})
_CODES = frozenset(c.value for c in ErrorCode)


def _bad(message: str, reason: str) -> InvalidInput:
    return InvalidInput(message, reason=reason)


def parse_run_status(value: object) -> RunStatus:
    try:
        return RunStatus(str(value))
    except ValueError:
        raise _bad("unknown run status", "UNKNOWN_STATUS") from None


def parse_task_status(value: object) -> TaskStatus:
    try:
        return TaskStatus(str(value))
    except ValueError:
        raise _bad("unknown task status", "UNKNOWN_STATUS") from None


def check_error(target: str, error: object) -> None:
    """``failed`` carries exactly a structured error; every other state carries none."""
    if target != "failed":
        if error is not None:
            raise _bad(
                f"only a transition to failed may carry an error, not {target}",
                "ERROR_ONLY_ON_FAILED",
            )
        return
    if not isinstance(error, Mapping):
        raise _bad("a transition to failed must carry an error object", "FAILED_REQUIRES_ERROR")
    if set(error) != _ERROR_KEYS:
        raise _bad(
            "a failure error has exactly code, message, retryable and details", "ERROR_MALFORMED"
        )
    if error["code"] not in _CODES or not isinstance(error["message"], str):
        raise _bad("a failure error needs one of the seven codes and a message", "ERROR_MALFORMED")
    if not isinstance(error["retryable"], bool) or not isinstance(error["details"], Mapping):
        raise _bad(
            "a failure error needs boolean retryable and an object of details", "ERROR_MALFORMED"
        )


def ensure_run_open(current: RunStatus) -> None:
    if current in RUN_TERMINAL:
        raise _bad(
            f"the run is {current.value}; a terminal run accepts no further change", "RUN_TERMINAL"
        )


def check_run_transition(current: RunStatus, target: RunStatus, error: object) -> None:
    ensure_run_open(current)
    if target not in RUN_TRANSITIONS[current]:
        raise _bad(f"a run cannot go from {current.value} to {target.value}", "ILLEGAL_TRANSITION")
    check_error(target.value, error)


def check_task_transition(current: TaskStatus, target: TaskStatus, error: object) -> None:
    if target not in TASK_TRANSITIONS[current]:
        raise _bad(f"a task cannot go from {current.value} to {target.value}", "ILLEGAL_TRANSITION")
    check_error(target.value, error)


def next_attempts(current: TaskStatus, target: TaskStatus, attempts: int) -> int:
    """Entering ``running`` counts an attempt — from pending, a retry, or a resume."""
    del current
    return attempts + 1 if target is T.RUNNING else attempts


def is_structured_error(error: Any) -> bool:
    try:
        check_error("failed", error)
    except InvalidInput:
        return False
    return True


class InFlightCalls(Protocol):
    """Which domain tool calls of a run (or of one task) are still in flight.

    The kernel's call table implements this; until it exists the default says nothing is.
    """

    async def in_flight(self, *, run_id: str, task_id: str | None) -> Sequence[str]: ...


class NothingInFlight:
    async def in_flight(self, *, run_id: str, task_id: str | None) -> Sequence[str]:
        del run_id, task_id
        return ()


NOTHING_IN_FLIGHT: InFlightCalls = NothingInFlight()


def ensure_nothing_in_flight(call_ids: Sequence[str], *, run_id: str, task_id: str | None) -> None:
    if call_ids:
        scope = f"task {task_id}" if task_id else f"run {run_id}"
        raise InvalidInput(
            f"{scope} has {len(call_ids)} tool call(s) in flight; wait for a terminal stage",
            reason="CALL_IN_FLIGHT",
            run_id=run_id,
            details={"call_ids": list(call_ids)},
        )
