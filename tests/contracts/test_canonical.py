"""Canonical JSON, digests and fingerprints, held against the rfc8785 reference."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.contracts.canonical import (
    Fingerprinter,
    canonical_bytes,
    canonical_text,
    sha256_bytes,
    sha256_digest,
)
from charter.errors import ConfigError, InvalidInput

SAFE = 2**53 - 1
KEY = b"k" * 32

# Strings without lone surrogates (which are not representable in UTF-8, so not JSON text).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-SAFE, SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=24,
)
# Values the fast path is built for: no floats, ASCII/BMP text.
plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | st.text(max_size=8).filter(str.isascii),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6).filter(str.isascii), inner, max_size=4)
    ),
    max_leaves=24,
)


def integral_to_float(value: Any) -> Any:
    """The same JSON value with every int that a double holds exactly written as a float."""
    if type(value) is int and abs(value) <= SAFE:
        return float(value)
    if isinstance(value, dict):
        return {k: integral_to_float(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_to_float(v) for v in value]
    return value


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@settings(max_examples=400)
@given(json_values)
def test_equals_rfc8785_on_arbitrary_json(value: Any) -> None:
    assert canonical_bytes(value) == bytes(rfc8785.dumps(value))


@settings(max_examples=200)
@given(plain_values)
def test_fast_path_equals_rfc8785(value: Any) -> None:
    assert canonical_bytes(value) == bytes(rfc8785.dumps(value))


@settings(max_examples=200)
@given(json_values, st.randoms(use_true_random=False))
def test_invariant_under_key_order(value: Any, rng: random.Random) -> None:
    other = shuffled(value, rng)
    assert canonical_bytes(other) == canonical_bytes(value)
    fp = Fingerprinter("k1", KEY)
    assert fp.fingerprint(other) == fp.fingerprint(value)


@settings(max_examples=200)
@given(json_values)
def test_invariant_under_int_and_integral_float(value: Any) -> None:
    as_floats = integral_to_float(value)
    assert canonical_bytes(as_floats) == canonical_bytes(value)
    fp = Fingerprinter("k1", KEY)
    assert fp.fingerprint(as_floats) == fp.fingerprint(value)


def test_issue_example_fingerprints_the_same() -> None:
    fp = Fingerprinter("k1", KEY)
    assert fp.fingerprint({"a": 1, "b": 2}) == fp.fingerprint({"b": 2, "a": 1.0})
    assert canonical_text({"b": 2, "a": 1.0}) == '{"a":1,"b":2}'


@settings(max_examples=100)
@given(json_values, st.binary(min_size=16, max_size=48), st.binary(min_size=16, max_size=48))
def test_different_keys_give_different_fingerprints(value: Any, key1: bytes, key2: bytes) -> None:
    if key1 == key2:
        return
    one = Fingerprinter("k1", key1).fingerprint(value)
    two = Fingerprinter("k1", key2).fingerprint(value)
    assert one != two
    assert one.startswith("hmac-sha256:k1:")
    assert len(one.rsplit(":", 1)[1]) == 64


def test_fingerprint_names_its_key_and_matches() -> None:
    one = Fingerprinter("retention-2024", KEY)
    two = Fingerprinter("retention-2025", KEY)
    value = {"x": [1, "two", None]}
    assert one.fingerprint(value).startswith("hmac-sha256:retention-2024:")
    assert one.fingerprint(value).split(":")[2] == two.fingerprint(value).split(":")[2]
    assert one.matches({"x": [1.0, "two", None]}, one.fingerprint(value))
    assert not one.matches({"x": [1, "two"]}, one.fingerprint(value))
    assert not two.matches(value, one.fingerprint(value))


def test_fingerprint_key_rules() -> None:
    with pytest.raises(ConfigError):
        Fingerprinter("k1", b"short")
    with pytest.raises(ConfigError):
        Fingerprinter("bad id!", KEY)
    assert "kkkk" not in repr(Fingerprinter("k1", KEY))


def test_digests() -> None:
    digest = sha256_digest({"b": 1, "a": [True, None]})
    assert digest == sha256_bytes(b'{"a":[true,null],"b":1}')
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # keys sort by UTF-16 code units: an astral character (D83D ...) before U+E000
        ({"\ue000": 1, "\U0001f600": 2}, '{"😀":2,"\ue000":1}'),
        ({"a": 1e21, "b": 1e-7, "c": 0.1, "d": -0.0}, '{"a":1e+21,"b":1e-7,"c":0.1,"d":0}'),
        (
            {"a": 1e16, "b": 123456789.125, "c": 5e-324},
            '{"a":10000000000000000,"b":123456789.125,"c":5e-324}',
        ),
        ('\u0000\u001f\u007f\u2028/"\\', '"\\u0000\\u001f\u007f\u2028/\\"\\\\"'),
        ([1.0, 2.5, -3.0], "[1,2.5,-3]"),
    ],
)
def test_known_encodings(value: Any, expected: str) -> None:
    assert canonical_text(value) == expected
    assert canonical_bytes(value) == bytes(rfc8785.dumps(value))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, {"a": [math.nan]}])
def test_non_finite_numbers_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        canonical_bytes(bad)
    assert info.value.reason == "ARGS_NON_FINITE_NUMBER"


@pytest.mark.parametrize("bad", ["\ud800", {"k": "x\udfff"}, {"\ud83d": 1}])
def test_lone_surrogates_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        canonical_bytes(bad)
    assert info.value.reason == "ARGS_LONE_SURROGATE"


@pytest.mark.parametrize("bad", [2**53, -(2**53), 10**20, {"a": [2**64]}])
def test_integers_beyond_a_double_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        canonical_bytes(bad)
