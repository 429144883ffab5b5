"""``shape`` lists a flat object of scalars in one loop (most arguments): it must list exactly
what the general walk lists — the same pointers, in the same order, with the same types and
sizes — for any keys (``/`` and ``~`` escaped, non-ASCII, beyond the BMP) and any size around
``MAX_FIELDS``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from charter.contracts.canonical import canonical_bytes
from charter.contracts.preview import MAX_FIELDS, _describe, shape, walk

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
keys = st.text(alphabet=st.sampled_from(["a", "b", "/", "~", "é", "𝄞", "0"]), max_size=4)


def walked(value: dict[str, Any]) -> dict[str, Any]:
    """What the general path of ``shape`` gives (the walk over every leaf)."""
    fields: dict[str, str] = {}
    omitted = 0
    for pointer, leaf in walk(value):
        if len(fields) >= MAX_FIELDS:
            omitted += 1
            continue
        fields[pointer] = _describe(leaf)
    out: dict[str, Any] = {"fields": fields, "bytes": len(canonical_bytes(value))}
    if omitted:
        out["omittedFields"] = omitted
    return out


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, scalars, max_size=8))
def test_a_flat_object_is_shaped_as_the_walk_shapes_it(value: dict[str, Any]) -> None:
    assert shape(value) == walked(value)


def test_flat_objects_around_the_field_limit() -> None:
    for n in (MAX_FIELDS - 1, MAX_FIELDS, MAX_FIELDS + 1):
        value: dict[str, Any] = {f"k{i}": "x" * (i % 3) for i in range(n)}
        assert shape(value) == walked(value)
    nested = {"a": 1, "b": {"c": [True, None]}}  # not flat: the general path
    assert shape(nested) == walked(nested)
