"""Handoff validation: forbidden keys at any depth and in any spelling, receiver, contract."""

from __future__ import annotations

from typing import Any

import pytest

from charter.errors import InvalidInput
from charter.ledger.views import ArtifactRow
from charter.project.catalog import TaskContract
from charter.workflows.handoff import FORBIDDEN_KEYS, MAX_DEPTH, validate_handoff

TASK = TaskContract(
    id="analyse",
    role="analyst",
    profile="analysis",
    title="",
    depends_on=("retrieve",),
    required_tools=("stats.summarise",),
    input_artifacts=("dataset",),
    output_artifacts=("summary",),
    acceptance_criteria=("mean and count per column",),
)
ARTIFACTS = {
    aid: ArtifactRow.from_row({"run_id": "run-1", "artifact_id": aid, "type": "dataset"})
    for aid in ("a1", "a2")
}


def good(**changes: Any) -> dict[str, Any]:
    h: dict[str, Any] = {
        "objective": "summarise the data set",
        "sender_role": "coordinator",
        "receiver_role": "analyst",
        "constraints": ["no network"],
        "acceptance_criteria": ["mean and count per column"],
        "input_artifact_ids": ["a1"],
        "expected_outputs": ["summary"],
        "capabilities": ["stats.summarise"],
        "budget": {"max_tokens": 2000, "max_tool_calls": 4, "timeout_seconds": 120},
    }
    h.update(changes)
    return h


def reason(h: Any) -> str:
    with pytest.raises(InvalidInput) as info:
        validate_handoff(h, TASK, ARTIFACTS)
    assert info.value.reason is not None
    return info.value.reason


def test_a_good_handoff_is_normalised() -> None:
    out = validate_handoff(good(trace_id="t-1"), TASK, ARTIFACTS)
    assert out["budget"]["max_tool_calls"] == 4
    assert out["trace_id"] == "t-1"


def _spellings(key: str) -> list[str]:
    words = key.split("_")
    return [
        key,
        key.upper(),
        "-".join(words),
        " ".join(w.capitalize() for w in words),
        words[0] + "".join(w.capitalize() for w in words[1:]),
    ]


@pytest.mark.parametrize("key", sorted(FORBIDDEN_KEYS))
def test_every_forbidden_key_at_top_level_nested_and_in_any_spelling(key: str) -> None:
    for spelling in _spellings(key):
        assert reason(good(**{spelling: []})) == "HANDOFF_FORBIDDEN_KEY"
        nested = good(constraints=[{"rule": {"deep": [{spelling: "x"}]}}])
        assert reason(nested) == "HANDOFF_FORBIDDEN_KEY"
        in_budget = good(budget={"max_tokens": 1, spelling: 1})
        assert reason(in_budget) == "HANDOFF_FORBIDDEN_KEY"


def test_nesting_is_limited() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 1):
        deep = {"k": deep}
    assert reason(good(notes=deep)) == "HANDOFF_TOO_DEEP"
    shallow: Any = "x"
    for _ in range(MAX_DEPTH - 2):
        shallow = {"k": shallow}
    validate_handoff(good(notes=shallow), TASK, ARTIFACTS)


def test_wrong_receiver_and_same_role() -> None:
    assert reason(good(receiver_role="writer", sender_role="x")) == "HANDOFF_WRONG_RECEIVER"
    assert reason(good(sender_role="analyst")) == "HANDOFF_SAME_ROLE"


def test_capabilities_outputs_and_criteria_must_equal_the_contract() -> None:
    assert reason(good(capabilities=[])) == "HANDOFF_CAPABILITIES_MISMATCH"
    assert (
        reason(good(capabilities=["stats.summarise", "data.fetch"]))
        == "HANDOFF_CAPABILITIES_MISMATCH"
    )
    assert reason(good(expected_outputs=["summary", "report"])) == "HANDOFF_OUTPUTS_MISMATCH"
    assert reason(good(acceptance_criteria=["anything"])) == "HANDOFF_CRITERIA_MISMATCH"


@pytest.mark.parametrize("missing", ["max_tokens", "max_tool_calls", "timeout_seconds"])
def test_missing_budget_fields(missing: str) -> None:
    budget = {"max_tokens": 1, "max_tool_calls": 1, "timeout_seconds": 1}
    del budget[missing]
    assert reason(good(budget=budget)) == "HANDOFF_BUDGET_INVALID"


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_budget_values_must_be_positive_integers(value: Any) -> None:
    budget = {"max_tokens": 1, "max_tool_calls": value, "timeout_seconds": 1}
    assert reason(good(budget=budget)) == "HANDOFF_BUDGET_INVALID"


def test_missing_and_unknown_fields() -> None:
    h = good()
    del h["budget"]
    assert reason(h) == "HANDOFF_INVALID"
    assert reason(good(extra_context="x")) == "HANDOFF_UNKNOWN_FIELD"


def test_inputs_resolve_to_exactly_one_artifact_per_type() -> None:
    assert reason(good(input_artifact_ids=[])) == "HANDOFF_INPUT_UNRESOLVED"
    assert reason(good(input_artifact_ids=["a1", "a2"])) == "HANDOFF_INPUT_UNRESOLVED"
    assert reason(good(input_artifact_ids=["ghost"])) == "HANDOFF_INPUT_UNKNOWN"
