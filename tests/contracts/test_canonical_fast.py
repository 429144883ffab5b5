"""The fast canonical encoder against the one it replaced, kept here verbatim.

``canonical_bytes`` moved its fast path from the standard library's C encoder (after a
recursive type check per value) to orjson (after a check that handles leaves inline). The
bytes must not change by one: every digest, fingerprint and ledger chain depends on them.
These properties hold the new encoder against the old one — equal bytes, or the same refusal —
on arbitrary values, including ones built to leave the fast path (floats with exponents,
integers beyond a double, astral characters in keys, lone surrogates, subclasses, deep
nesting).
"""

from __future__ import annotations

import enum
import json
import json.encoder
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.contracts import canonical
from charter.contracts.canonical import canonical_bytes, canonical_bytes_of_plain
from charter.errors import InvalidInput

# -- the encoder before this change (charter.contracts.canonical at main, d5a71f6) ----------

_SAFE_INT = 2**53 - 1
_old_encoder = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
)
_old_c_encode: Any = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _old_encoder.default, json.encoder.encode_basestring, None, ":", ",", True, False, False
)


def _old_encode_fast(value: Any) -> str:
    return "".join(_old_c_encode(value, 0))


def _old_simple(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    if kind is float:
        return 1e-4 <= abs(value) < 1e16 and not value.is_integer()
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                return False
            if not _old_simple(item):
                return False
        return True
    if kind is list or kind is tuple:
        return all(_old_simple(item) for item in value)
    return False


def old_canonical_bytes(value: Any) -> bytes:
    try:
        if _old_simple(value):
            return _old_encode_fast(value).encode("utf-8")
        return bytes(rfc8785.dumps(canonical._normalize(value)))
    except UnicodeEncodeError:
        raise InvalidInput(
            "a string contains a lone surrogate", reason="ARGS_LONE_SURROGATE"
        ) from None
    except rfc8785.CanonicalizationError as exc:
        raise canonical.domain_error(value, exc) from None


# -- values ---------------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


class Count(int):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
texts = (
    st.text(max_size=10)
    | st.text(st.characters(max_codepoint=0x7F), max_size=10)
    | st.text(any_char, max_size=10)
    | st.sampled_from(["\ud800", "a\udfff", "\U0001f600", "\ue000", "\uffff", "\u2028", "\x00"])
)
floats = (
    st.floats()
    | st.floats(min_value=1e-4, max_value=1e16)
    | st.sampled_from([0.1, 1e-4, 9.999e-5, 1e16, 1e16 - 2, 5e-324, 1e21, -0.0, 2.5, 1.0])
)
ints = (
    st.integers(-_SAFE_INT, _SAFE_INT)
    | st.integers()
    | st.sampled_from([_SAFE_INT, -_SAFE_INT, 2**53, -(2**53), 2**63, 2**64, -(2**63) - 1])
)
odd = st.sampled_from([Colour.RED, Level.HIGH, Name("n"), Count(3), b"x", {1, 2}, object(), 1 + 2j])
scalars = st.none() | st.booleans() | ints | floats | texts
keys = texts | st.sampled_from([Name("k"), "\U0001f600", "\ue000"])
values = st.recursive(
    scalars | odd,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=5)
        | st.dictionaries(keys, inner, max_size=3).map(Mapping)
        | st.dictionaries(ints, inner, min_size=1, max_size=2)
    ),
    max_leaves=30,
)
plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-_SAFE_INT, _SAFE_INT)
    | st.text(st.characters(max_codepoint=0x7F), max_size=12),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(st.characters(max_codepoint=0x7F), max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def outcome(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", encode(value)
    except InvalidInput as exc:
        return "refused", exc.reason
    except Exception as exc:  # the old encoder's other errors must stay the same errors
        return "raised", type(exc).__name__


@settings(max_examples=1500)
@given(values)
def test_new_encoder_matches_the_old_one(value: Any) -> None:
    assert outcome(canonical_bytes, value) == outcome(old_canonical_bytes, value)


@settings(max_examples=500)
@given(plain_values)
def test_plain_encoder_matches_the_old_one(value: Any) -> None:
    assert canonical_bytes_of_plain(value) == _old_encode_fast(value).encode("utf-8")
    assert canonical_bytes(value) == old_canonical_bytes(value)


@settings(max_examples=300)
@given(st.dictionaries(texts, floats | ints | texts, max_size=8))
def test_flat_objects_match_the_old_encoder(value: dict[str, Any]) -> None:
    assert outcome(canonical_bytes, value) == outcome(old_canonical_bytes, value)


@pytest.mark.parametrize("depth", [1, 200, 254, 255, 256, 400])
def test_deep_nesting_matches_the_old_encoder(depth: int) -> None:
    """orjson stops at 254 levels; the standard encoder takes over past that."""
    value: Any = {"leaf": "x"}
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    assert canonical_bytes(value) == old_canonical_bytes(value)


@pytest.mark.parametrize("bad", ["\ud800", ["ok", "\udfff"], {"k": {"n": "x\ud83d"}}])
def test_lone_surrogates_are_refused_as_before(bad: Any) -> None:
    for encode in (canonical_bytes, old_canonical_bytes):
        with pytest.raises(InvalidInput) as info:
            encode(bad)
        assert info.value.reason == "ARGS_LONE_SURROGATE"


def test_a_tuple_encodes_as_an_array() -> None:
    assert canonical_bytes(("a", (1, None))) == b'["a",[1,null]]'
