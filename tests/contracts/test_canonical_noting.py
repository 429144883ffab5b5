"""``canonical_bytes_noting``: the same bytes (or the same refusal) as ``canonical_bytes``.

A group commit encodes each payload with a memo (``proven``) of the nested dicts and lists it
proved simple, and then the projection rows built from those payloads, skipping what the memo
holds. These properties hold the memo'd encoder against the plain one on arbitrary values —
the odd ones of ``test_canonical_fast`` (astral and non-ASCII keys, big integers, floats with
exponents, lone surrogates, tuples, subclasses) — as a payload first and then as a row that
holds the payload's own nested objects, and check that the memo holds only values that are
simple.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.contracts import canonical
from charter.contracts.canonical import canonical_bytes, canonical_bytes_noting
from tests.contracts.test_canonical_fast import keys, outcome, values


def noting(proven: dict[int, Any]) -> Any:
    return lambda value: canonical_bytes_noting(value, proven)


def test_values_reach_the_fast_path() -> None:
    # the property below means something only if a good part of its values take the memo'd
    # fast path and note nested values
    proven: dict[int, Any] = {}
    payload = {"a": {"b": [1, "x"]}, "c": ["é", {"d": None}], "e": 2.5}
    assert canonical_bytes_noting(payload, proven) == canonical_bytes(payload)
    assert {id(payload["a"]), id(payload["c"])} <= set(proven)


@settings(max_examples=600)
@given(st.dictionaries(keys, values, max_size=6), st.dictionaries(keys, values, max_size=6))
def test_payload_then_row_match_the_plain_encoder(payload: Any, extra: dict[Any, Any]) -> None:
    proven: dict[int, Any] = {}
    assert outcome(noting(proven), payload) == outcome(canonical_bytes, payload)
    # every value the memo holds is the very object it names, and simple
    for ident, held in proven.items():
        assert id(held) == ident
        assert canonical._simple(held)
    # a row built of the payload's nested objects (as a projection handler builds one), with
    # values of its own beside them
    row = {**extra, **{f"p{i}": v for i, v in enumerate(payload.values())}}
    assert outcome(noting(proven), row) == outcome(canonical_bytes, row)


@settings(max_examples=500)
@given(values)
def test_any_value_matches_the_plain_encoder(value: Any) -> None:
    """Not a dict, or a dict of anything: the same bytes or the same refusal."""
    assert outcome(noting({}), value) == outcome(canonical_bytes, value)


def test_the_memo_is_what_spares_the_walk() -> None:
    """A nested value the memo holds is not walked again (here one planted that is *not*
    simple, which only the memo's word lets through): an equal but other object is."""
    planted = {"n": 1.0}  # not simple: canonically 1, which the fast encoder writes as 1.0
    proven: dict[int, Any] = {id(planted): planted}
    assert canonical_bytes_noting({"k": planted}, proven) == b'{"k":{"n":1.0}}'
    assert canonical_bytes_noting({"k": dict(planted)}, proven) == b'{"k":{"n":1}}'
    assert canonical_bytes({"k": planted}) == b'{"k":{"n":1}}'


@pytest.mark.parametrize(
    "bad",
    [
        {"k": "\ud800"},
        {"k": ["ok", "a\udfff"]},
        {"\U0001f600": {"x": 1}, "a": 1},
        {"k": {"n": 2**60}},
        {"k": (1, 1.0)},
        {1: "int key"},
        {"k": float("nan")},
    ],
)
def test_odd_payloads_go_the_general_way(bad: Any) -> None:
    proven: dict[int, Any] = {}
    assert outcome(noting(proven), bad) == outcome(canonical_bytes, bad)
    assert all(canonical._simple(v) for v in proven.values())
