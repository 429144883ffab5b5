"""Why a task may not start yet, said precisely (``charter.kernel.task_rules.check_start``): a
dependency still open is named with its status, and one that was skipped or cancelled — which
never completes — is said to block the task for good, instead of "waits for" it."""

from __future__ import annotations

import pytest

from charter.errors import InvalidInput
from charter.kernel.task_rules import check_start
from charter.ledger.views import RunRow, TaskRow


def _tasks(**statuses: str) -> dict[str, TaskRow]:
    return {t: TaskRow(run_id="r", task_id=t, status=s) for t, s in statuses.items()}


def _refusal(**statuses: str) -> InvalidInput:
    run = RunRow(run_id="r", status="running")
    report = TaskRow(run_id="r", task_id="report", status="pending", depends_on=tuple(statuses))
    with pytest.raises(InvalidInput) as caught:
        check_start(run, report, {**_tasks(**statuses), "report": report})
    assert caught.value.reason == "TASK_DEPENDENCIES_OPEN"
    return caught.value


def test_an_open_dependency_is_named_with_its_status() -> None:
    refused = _refusal(fetch="completed", analyse="running")
    assert refused.message == "task report waits for analyse (running)"
    assert refused.details["statuses"] == {"analyse": "running"}


@pytest.mark.parametrize("ended", ["skipped", "cancelled"])
def test_a_dependency_that_will_never_complete_is_said_to_block(ended: str) -> None:
    refused = _refusal(fetch="pending", analyse=ended)
    assert refused.message == (
        f"task report cannot start: its dependency analyse was {ended} and will never complete"
    )
    assert refused.details["waiting"] == ["fetch", "analyse"]
