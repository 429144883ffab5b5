"""The transition tables and guards, exactly as the ChemSpace seed draws them."""

from __future__ import annotations

import pytest

from charter.errors import InvalidInput
from charter.ledger.lifecycle import (
    RUN_TERMINAL,
    RUN_TRANSITIONS,
    TASK_TERMINAL,
    TASK_TRANSITIONS,
    RunStatus,
    TaskStatus,
    check_error,
    check_run_transition,
    check_task_transition,
    ensure_nothing_in_flight,
    is_structured_error,
    next_attempts,
)

ERR = {"code": "timeout", "message": "slow", "retryable": False, "details": {}}


def test_run_table() -> None:
    assert {
        RunStatus.COMPLETED,
        RunStatus.PARTIAL,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
    } == RUN_TERMINAL
    assert RunStatus.PLANNING in RUN_TRANSITIONS[RunStatus.SUBMITTED]
    assert RunStatus.RUNNING not in RUN_TRANSITIONS[RunStatus.SUBMITTED]
    assert RunStatus.INPUT_REQUIRED in RUN_TRANSITIONS[RunStatus.RUNNING]
    assert RunStatus.RUNNING in RUN_TRANSITIONS[RunStatus.INPUT_REQUIRED]
    assert RunStatus.PARTIAL in RUN_TRANSITIONS[RunStatus.RUNNING]


def test_task_table() -> None:
    assert {TaskStatus.COMPLETED, TaskStatus.CANCELLED, TaskStatus.SKIPPED} == TASK_TERMINAL
    assert TASK_TRANSITIONS[TaskStatus.FAILED] == {TaskStatus.RUNNING}
    assert TaskStatus.SKIPPED in TASK_TRANSITIONS[TaskStatus.PENDING]


@pytest.mark.parametrize("current", list(RunStatus))
@pytest.mark.parametrize("target", list(RunStatus))
def test_every_run_pair(current: RunStatus, target: RunStatus) -> None:
    error = ERR if target is RunStatus.FAILED else None
    if current in RUN_TERMINAL:
        with pytest.raises(InvalidInput) as info:
            check_run_transition(current, target, error)
        assert info.value.reason == "RUN_TERMINAL"
    elif target in RUN_TRANSITIONS[current]:
        check_run_transition(current, target, error)
    else:
        with pytest.raises(InvalidInput) as info:
            check_run_transition(current, target, error)
        assert info.value.reason == "ILLEGAL_TRANSITION"


@pytest.mark.parametrize("current", list(TaskStatus))
@pytest.mark.parametrize("target", list(TaskStatus))
def test_every_task_pair(current: TaskStatus, target: TaskStatus) -> None:
    error = ERR if target is TaskStatus.FAILED else None
    if target in TASK_TRANSITIONS[current]:
        check_task_transition(current, target, error)
    else:
        with pytest.raises(InvalidInput):
            check_task_transition(current, target, error)


def test_error_shapes() -> None:
    assert is_structured_error(ERR)
    for bad in (
        None,
        "boom",
        {**ERR, "code": "nope"},
        {**ERR, "retryable": "yes"},
        {k: v for k, v in ERR.items() if k != "details"},
        {**ERR, "extra": 1},
    ):
        assert not is_structured_error(bad)
    with pytest.raises(InvalidInput) as info:
        check_error("running", ERR)
    assert info.value.reason == "ERROR_ONLY_ON_FAILED"


def test_attempts_and_in_flight() -> None:
    assert next_attempts(TaskStatus.PENDING, TaskStatus.RUNNING, 0) == 1
    assert next_attempts(TaskStatus.FAILED, TaskStatus.RUNNING, 1) == 2
    assert next_attempts(TaskStatus.RUNNING, TaskStatus.COMPLETED, 2) == 2
    ensure_nothing_in_flight([], run_id="r", task_id=None)
    with pytest.raises(InvalidInput) as info:
        ensure_nothing_in_flight(["c1"], run_id="r", task_id="t")
    assert info.value.reason == "CALL_IN_FLIGHT"
    assert info.value.details == {"call_ids": ["c1"]}
