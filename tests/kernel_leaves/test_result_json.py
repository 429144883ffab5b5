"""``ensure_json``'s fast copy of plain results against the careful walk it skips.

The fast path (:func:`charter.kernel.executor_port._plain`) copies results made of exact
built-in types; everything else falls to ``_json``, which names where a result stops being
JSON. Either way the answer must be the one ``_json`` alone gives: the same copy, or the same
refusal (message, reason, pointer).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.errors import ContractViolation
from charter.kernel import executor_port
from charter.kernel.executor_port import MAX_RESULT_DEPTH, ensure_json


class Text(str):
    pass


class Number(int):
    pass


class Doc(dict):  # type: ignore[type-arg]
    pass


def careful(value: Any) -> tuple[str, Any]:
    try:
        return "ok", executor_port._json(value, "", 0)
    except ContractViolation as exc:
        return "refused", (exc.message, exc.reason, exc.details)


def fast(value: Any) -> tuple[str, Any]:
    try:
        return "ok", ensure_json(value)
    except ContractViolation as exc:
        return "refused", (exc.message, exc.reason, exc.details)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same exact types all the way down (``1 == 1.0 == True`` is not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(
            type(k) is type(j) and same(a[k], b[j]) for k, j in zip(a, b, strict=True)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


texts = st.text(max_size=8) | st.sampled_from(["\ud800", "é", "a/b~c", "", Text("sub")])
keys = texts | st.sampled_from([1, None, Text("k/~")])
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | texts
    | st.sampled_from([Number(7), b"raw", {1, 2}, object(), math.inf, -math.nan])
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=4)
        | st.dictionaries(texts, inner, max_size=3).map(Doc)
    ),
    max_leaves=25,
)


@settings(max_examples=1000)
@given(values)
def test_fast_copy_equals_the_careful_walk(value: Any) -> None:
    got, expected = fast(value), careful(value)
    assert got[0] == expected[0]
    if got[0] == "ok":
        assert same(got[1], expected[1])
    else:
        assert got[1] == expected[1]


def test_the_copy_is_a_copy() -> None:
    inner = ["x"]
    result = {"a": inner, "b": {"c": 1}}
    copied = ensure_json(result)
    assert copied == result
    assert copied is not result
    assert copied["a"] is not inner
    assert copied["b"] is not result["b"]


@pytest.mark.parametrize("extra", [-1, 0, 1, 2])
def test_depth_limit_is_the_careful_walks(extra: int) -> None:
    """Nesting right at the limit is kept, one deeper is refused, for dicts and lists."""
    for empty, wrap in (({}, lambda v: {"k": v}), ([], lambda v: [v])):
        for leaf in (empty, "leaf"):
            value: Any = leaf
            for _ in range(MAX_RESULT_DEPTH + extra):
                value = wrap(value)
            assert fast(value) == careful(value)
