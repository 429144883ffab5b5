"""Verification lists rebuilt rows in ``TableSpec.sort_key`` order; its fast path (sort by
``order_by`` alone when no two rows share a value) must give that order, ties included."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.ledger.checker import _sorted
from charter.ledger.projections import TABLES

# order_by values as handlers write them (seq numbers, timestamps), with ties, and values a
# rebuilt row could hold after a forged event: lists (unhashable), None.
_order = st.integers(0, 6) | st.sampled_from(["2026-01-01", "2026-01-02"])


@given(
    st.lists(st.tuples(_order, st.text(max_size=2)), max_size=12, unique_by=lambda r: r[1]),
    st.sampled_from(["calls", "tasks", "contexts"]),
)
def test_sorted_is_sort_key_order(values: list[tuple[Any, str]], table: str) -> None:
    spec = TABLES[table]
    rows: list[dict[str, Any]] = [dict.fromkeys(spec.keys, "r") for _ in values]
    for row, (order, key) in zip(rows, values, strict=True):
        row[spec.order_by] = order
        row[spec.keys[-1]] = key
    try:
        expected = sorted(rows, key=spec.sort_key)
    except TypeError:  # ints beside str: neither sort orders them
        with pytest.raises(TypeError):
            _sorted(table, rows)
        return
    assert _sorted(table, rows) == expected


def test_ties_are_broken_by_the_keys() -> None:
    rows = [
        {"run_id": "r", "context_id": "c", "call_id": "b", "updated_seq": 5},
        {"run_id": "r", "context_id": "c", "call_id": "a", "updated_seq": 5},
        {"run_id": "r", "context_id": "c", "call_id": "c", "updated_seq": 1},
    ]
    assert [r["call_id"] for r in _sorted("calls", rows)] == ["c", "a", "b"]


def test_unhashable_order_values_take_the_whole_key() -> None:
    rows = [
        {"run_id": "r", "context_id": "c", "call_id": "b", "updated_seq": [5]},
        {"run_id": "r", "context_id": "c", "call_id": "a", "updated_seq": [5]},
    ]
    assert [r["call_id"] for r in _sorted("calls", rows)] == ["a", "b"]
