"""A value canonical JSON cannot hold is refused saying what and where (it said only the
encoder's exception name: "IntegerDomainError")."""

from __future__ import annotations

import pytest

from charter.contracts.canonical import canonical_bytes
from charter.errors import InvalidInput


@pytest.mark.parametrize(
    ("value", "field", "what"),
    [
        ({"budget": {"max_tokens": 10**29}}, "/budget/max_tokens", "an integer beyond"),
        ({"a": [1, {"b/c": -(2**60)}]}, "/a/1/b~1c", "an integer beyond"),
        (10**20, "/", "an integer beyond"),
    ],
)
def test_an_out_of_range_number_is_named_by_its_path(value: object, field: str, what: str) -> None:
    with pytest.raises(InvalidInput) as info:
        canonical_bytes(value)
    assert info.value.reason == "CANONICALIZATION_FAILED"
    assert info.value.details == {"field": field}
    assert what in info.value.message
    assert field in info.value.message
    assert "Error" not in info.value.message
