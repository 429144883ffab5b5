from __future__ import annotations

import pytest

from charter.contracts.model import Danger, ToolContract, contract_or_raise, make_contract
from charter.errors import ContractError


def test_digest_is_stable_when_defaults_are_spelled_out() -> None:
    short = contract_or_raise({"id": "a.b", "description": "d"})
    spelled = contract_or_raise(
        {
            "id": "a.b",
            "name": "a_b",
            "version": "1.0.0",
            "description": "d",
            "effect": "read",
            "danger": "low",
            "approval": "none",
            "timeout_s": 30,
        }
    )
    assert short.digest == spelled.digest
    assert short.digest.startswith("sha256:")
    assert len(short.digest) == len("sha256:") + 64


def test_any_field_change_changes_the_digest() -> None:
    base = contract_or_raise({"id": "a.b", "description": "d"})
    for change in (
        {"description": "e"},
        {"version": "1.0.1"},
        {"timeout_s": 5},
        {"args_schema": {"type": "object"}},
        {"danger": "high"},
    ):
        other = contract_or_raise({"id": "a.b", "description": "d", **change})
        assert other.digest != base.digest, change


def test_contract_round_trips_through_its_canonical_form() -> None:
    c = contract_or_raise(
        {"id": "a.b", "description": "d", "effect": "write", "permissions": ["z", "a"]}
    )
    again = ToolContract.model_validate(c.canonical())
    assert again == c
    assert again.digest == c.digest
    assert c.permissions == ("a", "z")


@pytest.mark.parametrize(
    ("data", "pointer", "fragment"),
    [
        ({"id": "bad id", "description": "d"}, "/id", "tool id"),
        ({"id": "a", "description": "d", "version": "1.0"}, "/version", "SemVer"),
        ({"id": "a", "description": "  "}, "/description", "description"),
        ({"id": "a", "description": "d", "effect": "delete"}, "/effect", "read"),
        ({"id": "a", "description": "d", "colour": "red"}, "/colour", "Extra"),
        ({"id": "a", "description": "d", "name": "has space"}, "", "model-facing name"),
        ({"id": "a", "description": "d", "redact": ["password"]}, "/redact", "JSON pointer"),
        ({"id": "a", "description": "d", "timeout_s": 0}, "/timeout_s", "greater than 0"),
    ],
)
def test_invalid_contracts_are_located(
    data: dict[str, object], pointer: str, fragment: str
) -> None:
    contract, problems = make_contract(data, file="tools/x.yaml", where="")
    assert contract is None
    assert any(p.pointer == pointer and fragment in p.message for p in problems), problems
    assert all(p.file == "tools/x.yaml" for p in problems)


def test_danger_can_be_raised_explicitly() -> None:
    c = contract_or_raise({"id": "a", "description": "d", "danger": "critical"})
    assert c.danger is Danger.CRITICAL


def test_contract_or_raise_names_the_tool() -> None:
    with pytest.raises(ContractError) as info:
        contract_or_raise({"id": "x.y", "description": "d", "effect": "nope"})
    assert info.value.tool == "x.y"
    assert info.value.pointer == "/effect"
