"""Strict argument intake: every documented reason, the property that nothing invalid gets
through, validation against the contract, and fingerprints equal to the canonical ones."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.contracts import schema as schema_module
from charter.contracts.canonical import Fingerprinter, canonical_bytes
from charter.contracts.intake import (
    INTAKE_LIMITS,
    Accepted,
    Intake,
    IntakeLimits,
    check_value,
    parse_arguments,
)
from charter.errors import ContractError, ErrorCode, InvalidInput

SAFE = 2**53 - 1
FP = Fingerprinter("k1", b"0123456789abcdef0123456789abcdef")
ANY_OBJECT: dict[str, Any] = {"type": "object"}
SIX_FIELDS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 64},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "id": {"type": "string", "format": "uuid"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "email", "id"],
    "additionalProperties": False,
}
GOOD = {
    "name": "Ada Lovelace",
    "age": 36,
    "email": "ada@example.com",
    "id": "123e4567-e89b-12d3-a456-426614174000",
    "tags": ["math", "engines"],
    "active": True,
}


def reason_of(raw: str | bytes, limits: IntakeLimits = INTAKE_LIMITS) -> str:
    with pytest.raises(InvalidInput) as info:
        parse_arguments(raw, limits=limits)
    assert info.value.code is ErrorCode.INVALID_INPUT
    return info.value.reason


# ---------------------------------------------------------------------------------------
# Every reason


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"a":1,"a":2}', "ARGS_DUPLICATE_KEY"),
        ('{"a":{"b":1,"c":2,"b":1}}', "ARGS_DUPLICATE_KEY"),
        ('{"a":NaN}', "ARGS_NON_FINITE_NUMBER"),
        ('{"a":Infinity}', "ARGS_NON_FINITE_NUMBER"),
        ('{"a":[-Infinity]}', "ARGS_NON_FINITE_NUMBER"),
        ('{"a":1e999}', "ARGS_NON_FINITE_NUMBER"),
        ('{"a":-1.5e400}', "ARGS_NON_FINITE_NUMBER"),
        ('{"a":"\\ud800"}', "ARGS_LONE_SURROGATE"),
        ('{"a":"x\\udfffy"}', "ARGS_LONE_SURROGATE"),
        ('{"a":"\\ude00\\ud83d"}', "ARGS_LONE_SURROGATE"),
        ('{"\\udbff":1}', "ARGS_LONE_SURROGATE"),
        ('{"a":"\ud800"}', "ARGS_LONE_SURROGATE"),
        ('{"a":9007199254740992}', "ARGS_INTEGER_OUT_OF_RANGE"),
        ('{"a":[-100000000000000000000]}', "ARGS_INTEGER_OUT_OF_RANGE"),
        ('{"a":' + "9" * 5000 + "}", "ARGS_INTEGER_OUT_OF_RANGE"),
        ("[1,2]", "ARGS_NOT_OBJECT"),
        ('"text"', "ARGS_NOT_OBJECT"),
        ("null", "ARGS_NOT_OBJECT"),
        ("3", "ARGS_NOT_OBJECT"),
        ("", "ARGS_MALFORMED_JSON"),
        ("   ", "ARGS_MALFORMED_JSON"),
        ('{"a":1', "ARGS_MALFORMED_JSON"),
        ('{"a":1}{"b":2}', "ARGS_MALFORMED_JSON"),
        ("{'a':1}", "ARGS_MALFORMED_JSON"),
        ('{"a":01}', "ARGS_MALFORMED_JSON"),
        ('{"a":"tab\there"}', "ARGS_MALFORMED_JSON"),
        ('{"a":1,}', "ARGS_MALFORMED_JSON"),
        ('\ufeff{"a":1}', "ARGS_MALFORMED_JSON"),
        (b'{"a":"\xff"}', "ARGS_INVALID_UTF8"),
        (b'{"a":"\xed\xa0\x80"}', "ARGS_INVALID_UTF8"),  # a surrogate encoded in UTF-8
        (b'{"a":"\xc0\xaf"}', "ARGS_INVALID_UTF8"),  # overlong
    ],
)
def test_documented_reasons(raw: str | bytes, reason: str) -> None:
    assert reason_of(raw) == reason


def test_duplicate_key_names_the_object_pointer() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_arguments('{"x":{"list":[1,{"ok":1},{"c":1,"d":2,"c":"secret-value"}]}}')
    assert info.value.details["pointer"] == "/x/list/2"
    assert info.value.details["key"] == "c"
    assert "/x/list/2" in info.value.message
    assert "secret-value" not in str(info.value)
    with pytest.raises(InvalidInput) as info:
        parse_arguments('{"a~/b":{"k":1,"k":2}}')
    assert info.value.details["pointer"] == "/a~0~1b"


def test_too_large_counts_utf8_bytes() -> None:
    limits = IntakeLimits(max_bytes=20)
    assert parse_arguments('{"a":"' + "x" * 12 + '"}', limits=limits)
    assert reason_of('{"a":"' + "x" * 13 + '"}', limits) == "ARGS_TOO_LARGE"
    assert reason_of('{"a":"' + "é" * 7 + '"}', limits) == "ARGS_TOO_LARGE"  # 14 bytes
    assert reason_of(('{"a":"' + "x" * 13 + '"}').encode(), limits) == "ARGS_TOO_LARGE"


def test_depth_limit_is_exact() -> None:
    limits = IntakeLimits(max_depth=4)
    assert parse_arguments('{"a":[[{"b":1}]]}', limits=limits)  # depth 4
    assert reason_of('{"a":[[{"b":[]}]]}', limits) == "ARGS_TOO_DEEP"
    assert reason_of('{"a":[[{"b":[1.5]}]]}', limits) == "ARGS_TOO_DEEP"  # slow path too


def test_default_depth_limit_and_pathological_nesting() -> None:
    assert INTAKE_LIMITS.max_depth == 64
    assert INTAKE_LIMITS.max_bytes == 1024 * 1024
    ok = '{"a":' + "[" * 63 + "]" * 63 + "}"
    assert parse_arguments(ok)
    assert reason_of('{"a":' + "[" * 64 + "]" * 64 + "}") == "ARGS_TOO_DEEP"
    # far past the interpreter's recursion limit: a reason, not a RecursionError
    assert reason_of('{"a":' + "[" * 200_000 + "]" * 200_000 + "}") == "ARGS_TOO_DEEP"


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    limits = IntakeLimits(max_depth=2)
    assert parse_arguments('{"a":"[[[[[[{{{{{{"}', limits=limits) == {"a": "[[[[[[{{{{{{"}


def test_malformed_json_message_gives_position_not_text() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_arguments('{"password":"hunter2" "x":1}')
    assert "hunter2" not in str(info.value)
    assert "column" in info.value.message
    assert info.value.details["position"] == 22


def test_integral_floats_become_ints() -> None:
    parsed = parse_arguments('{"a":1.0,"b":-2e3,"c":1.5,"d":-0.0,"e":1e300,"f":9007199254740991.0}')
    assert parsed == {"a": 1, "b": -2000, "c": 1.5, "d": 0, "e": 1e300, "f": SAFE}
    assert type(parsed["a"]) is int
    assert type(parsed["c"]) is float
    assert type(parsed["e"]) is float  # beyond 2**53: stays a double


def test_valid_surrogate_pairs_and_unicode_are_fine() -> None:
    assert parse_arguments('{"a":"\\ud83d\\ude00","é":"ü"}') == {"a": "😀", "é": "ü"}
    assert parse_arguments('{"a":"😀"}'.encode()) == {"a": "😀"}


def test_str_and_bytes_agree() -> None:
    text = json.dumps(GOOD, ensure_ascii=False)
    assert parse_arguments(text) == parse_arguments(text.encode()) == GOOD
    assert parse_arguments(bytearray(text.encode())) == GOOD


def test_wrong_python_type_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_arguments({"a": 1})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Property: nothing documented as invalid is ever accepted

SENTINEL = "\u0000SENTINEL\u0000"
SENTINEL_JSON = json.dumps(SENTINEL)
LIMITS = IntakeLimits(max_depth=8)

keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-SAFE, SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=12,
)
objects = st.dictionaries(keys, values, max_size=4)

BAD_FRAGMENTS: dict[str, list[str]] = {
    "ARGS_NON_FINITE_NUMBER": ["NaN", "Infinity", "-Infinity", "1e999", "-2.5E+400"],
    "ARGS_LONE_SURROGATE": ['"\\ud800"', '"a\\udc00"', '"\\udfff\\ud800"', '"\\uD83D x"'],
    "ARGS_DUPLICATE_KEY": ['{"k":1,"k":1}', '{"a":[],"b":0,"a":null}', '{"\\u0041":1,"A":2}'],
    "ARGS_TOO_DEEP": ["[" * 9 + "]" * 9, '{"x":' * 9 + "1" + "}" * 9],
    "ARGS_INTEGER_OUT_OF_RANGE": ["9007199254740992", "-18446744073709551616"],
}


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def plant(value: Any, data: st.DataObject) -> Any:
    """A copy of ``value`` with SENTINEL placed at one random position (a new object member
    or a new array item), so the text can be corrupted at exactly one place."""
    containers: list[Any] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict | list):
            containers.append(node)
            for child in node.values() if isinstance(node, dict) else node:
                collect(child)

    copy = json.loads(json.dumps(value))
    collect(copy)
    target = data.draw(st.sampled_from(containers))
    if isinstance(target, dict):
        target["\u0000planted"] = SENTINEL
    else:
        target.insert(data.draw(st.integers(0, len(target))), SENTINEL)
    return copy


@settings(max_examples=300, deadline=None)
@given(objects, st.sampled_from(sorted(BAD_FRAGMENTS)), st.data(), st.booleans())
def test_strict_parser_never_accepts_documented_invalid_input(
    value: dict[str, Any], reason: str, data: st.DataObject, ascii_only: bool
) -> None:
    planted = plant(value, data)
    text = json.dumps(planted, ensure_ascii=ascii_only)
    fragment = data.draw(st.sampled_from(BAD_FRAGMENTS[reason]))
    corrupted = text.replace(SENTINEL_JSON, fragment)
    assert corrupted != text
    with pytest.raises(InvalidInput) as info:
        parse_arguments(corrupted, limits=LIMITS)
    if reason == "ARGS_TOO_DEEP" or depth(planted) <= LIMITS.max_depth:
        assert info.value.reason == reason
    # (a value already deeper than the limit may be reported as too deep first)
    with pytest.raises(InvalidInput):
        Intake(ANY_OBJECT, FP, limits=LIMITS).accept(corrupted.encode())


@settings(max_examples=300, deadline=None)
@given(objects, st.booleans())
def test_valid_objects_parse_to_themselves_and_fingerprint_canonically(
    value: dict[str, Any], ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    limits = IntakeLimits(max_depth=64)
    parsed = parse_arguments(text, limits=limits)
    assert parsed == value
    accepted = Intake(ANY_OBJECT, FP, limits=limits).accept(text)
    assert accepted.arguments == value
    assert accepted.fingerprint == FP.fingerprint(value)
    assert Intake(ANY_OBJECT, FP, limits=limits).accept_value(value) == accepted


# ---------------------------------------------------------------------------------------
# Python values


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_check_value_normalises_to_plain_json() -> None:
    value = OrderedDict(a=(1, 2.0), b=Colour.RED, c=Level.HIGH, d={"e": [None, True, 1.5]})
    out = check_value(value)
    assert out == {"a": [1, 2], "b": "red", "c": 3, "d": {"e": [None, True, 1.5]}}
    assert type(out) is dict
    assert type(out["a"]) is list
    assert type(out["b"]) is str
    assert type(out["c"]) is int
    assert check_value({Colour.RED: 1}) == {"red": 1}


@pytest.mark.parametrize(
    ("value", "reason", "pointer"),
    [
        ({1: "x"}, "ARGS_NOT_JSON", ""),
        ({"a": {"b": {2, 3}}}, "ARGS_NOT_JSON", "/a/b"),
        ({"a": b"bytes"}, "ARGS_NOT_JSON", "/a"),
        ({"a": [object()]}, "ARGS_NOT_JSON", "/a/0"),
        ({"a": math.nan}, "ARGS_NON_FINITE_NUMBER", "/a"),
        ({"a": [1, -math.inf]}, "ARGS_NON_FINITE_NUMBER", "/a/1"),
        ({"a": "x\ud800"}, "ARGS_LONE_SURROGATE", "/a"),
        ({"\udc00": 1}, "ARGS_LONE_SURROGATE", "/\udc00"),
        ({"a": 2**60}, "ARGS_INTEGER_OUT_OF_RANGE", "/a"),
    ],
)
def test_check_value_reasons(value: Any, reason: str, pointer: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_value(value)
    assert info.value.reason == reason
    assert info.value.details["pointer"] == pointer


def test_check_value_depth_size_cycles_and_non_objects() -> None:
    limits = IntakeLimits(max_depth=3, max_bytes=30)
    assert check_value({"a": [[1]]}, limits=limits) == {"a": [[1]]}
    with pytest.raises(InvalidInput) as info:
        check_value({"a": [[[1]]]}, limits=limits)
    assert info.value.reason == "ARGS_TOO_DEEP"
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(InvalidInput) as info:
        check_value({"a": cycle})
    assert info.value.reason == "ARGS_TOO_DEEP"
    with pytest.raises(InvalidInput) as info:
        check_value({"a": "x" * 40}, limits=limits)
    assert info.value.reason == "ARGS_TOO_LARGE"
    for not_object in ([1], "x", None, 3):
        with pytest.raises(InvalidInput) as info:
            check_value(not_object)
        assert info.value.reason == "ARGS_NOT_OBJECT"


# ---------------------------------------------------------------------------------------
# The whole intake


def test_accept_returns_arguments_and_fingerprint() -> None:
    intake = Intake(SIX_FIELDS, FP)
    accepted = intake.accept(json.dumps(GOOD))
    assert isinstance(accepted, Accepted)
    assert accepted.arguments == GOOD
    assert accepted.fingerprint == FP.fingerprint(GOOD)
    assert accepted.fingerprint.startswith("hmac-sha256:k1:")
    with pytest.raises(AttributeError):
        accepted.fingerprint = "x"  # type: ignore[misc]


def test_fingerprint_ignores_key_order_and_integral_floats() -> None:
    intake = Intake(ANY_OBJECT, FP)
    one = intake.accept('{"a":1,"b":2}').fingerprint
    assert intake.accept('{"b":2,"a":1.0}').fingerprint == one
    assert intake.accept(b'{ "b" : 2.0 , "a" : 1 }').fingerprint == one
    assert intake.accept_value({"b": 2, "a": 1.0}).fingerprint == one
    other_key = Fingerprinter("k1", b"another-key-of-sixteen-bytes-or-more")
    assert Intake(ANY_OBJECT, other_key).accept('{"a":1,"b":2}').fingerprint != one


@pytest.mark.parametrize(
    ("change", "pointer", "keyword"),
    [
        ({"age": "thirty-six"}, "/age", "type"),
        ({"age": True}, "/age", "type"),
        ({"age": 151}, "/age", "maximum"),
        ({"email": "not-an-email"}, "/email", "format"),
        ({"id": "nope"}, "/id", "format"),
        ({"tags": ["ok", 5]}, "/tags/1", "type"),
        ({"name": ""}, "/name", "minLength"),
    ],
)
def test_schema_mismatch_names_pointer_and_keyword_not_value(
    change: dict[str, Any], pointer: str, keyword: str
) -> None:
    intake = Intake(SIX_FIELDS, FP)
    bad = {**GOOD, **change}
    for call in (lambda: intake.accept(json.dumps(bad)), lambda: intake.accept_value(bad)):
        with pytest.raises(InvalidInput) as info:
            call()
        error = info.value
        assert error.reason == "ARGS_SCHEMA_MISMATCH"
        assert error.details["pointer"] == pointer
        assert error.details["keyword"] == keyword
        assert pointer in error.message
        assert keyword in error.message
        for leaked in ("thirty-six", "not-an-email", "nope", "151"):
            assert leaked not in str(error)
            assert leaked not in json.dumps(error.to_dict())


def test_missing_and_unexpected_properties() -> None:
    intake = Intake(SIX_FIELDS, FP)
    missing = {k: v for k, v in GOOD.items() if k != "email"}
    with pytest.raises(InvalidInput) as info:
        intake.accept(json.dumps(missing))
    assert info.value.details["keyword"] == "required"
    assert "email" in info.value.message
    with pytest.raises(InvalidInput) as info:
        intake.accept(json.dumps({**GOOD, "extra": "secret-thing"}))
    assert info.value.details["keyword"] == "additionalProperties"
    assert "secret-thing" not in str(info.value)


def test_strict_parse_runs_before_validation() -> None:
    intake = Intake(SIX_FIELDS, FP)
    with pytest.raises(InvalidInput) as info:
        intake.accept('{"name":"a","name":"b"}')
    assert info.value.reason == "ARGS_DUPLICATE_KEY"


def test_intake_refuses_a_schema_outside_the_subset() -> None:
    with pytest.raises(ContractError):
        Intake({"type": "object", "properties": {"x": {"if": {}}}}, FP)
    with pytest.raises(ContractError):
        Intake({"type": "string"}, FP)  # arguments are always an object


def test_validator_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = schema_module.build_validator

    def counting(schema: Any) -> Any:
        calls.append(schema)
        return real(schema)

    monkeypatch.setattr(schema_module, "build_validator", counting)
    intake = Intake(SIX_FIELDS, FP)
    assert len(calls) == 1
    for _ in range(50):
        intake.accept(json.dumps(GOOD))
        intake.accept_value(GOOD)
    assert len(calls) == 1


def test_fingerprint_is_over_the_canonical_bytes() -> None:
    intake = Intake(ANY_OBJECT, FP)
    text = '{"z":[1,2,{"y":null,"b":"q\\n\\"/"}],"a":true,"m":"\x7f","f":0.5}'
    accepted = intake.accept(text)
    assert accepted.fingerprint == FP.fingerprint(json.loads(text))
    assert canonical_bytes(accepted.arguments) == (
        b'{"a":true,"f":0.5,"m":"\x7f","z":[1,2,{"b":"q\\n\\"/","y":null}]}'
    )


@pytest.mark.parametrize(
    ("raw", "reason", "pointer"),
    [
        ('{"a":{"b":[1,NaN]}}', "ARGS_NON_FINITE_NUMBER", "/a/b/1"),
        ('{"a":{"b":[1,-1e999]}}', "ARGS_NON_FINITE_NUMBER", "/a/b/1"),
        ('{"x":1,"big":[0,12345678901234567890]}', "ARGS_INTEGER_OUT_OF_RANGE", "/big/1"),
        ('{"s":["ok","\\udc00"]}', "ARGS_LONE_SURROGATE", "/s/1"),
    ],
)
def test_rejected_values_are_located_by_pointer(raw: str, reason: str, pointer: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_arguments(raw)
    assert info.value.reason == reason
    assert info.value.details["pointer"] == pointer


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1e-7}',
        '{"a":[0.00001]}',
        '{"a":1e16}',
        '{"a":1e20,"b":-2.5e30}',
        '{"a":9007199254740993.0}',
        '{"\\ud83d\\ude00":1,"\\ue000":2}',  # astral vs BMP private-use key order
        '{"k":{"\\ud800\\udc00":1,"\\uffff":2}}',
        '{"\\u00e9":"\\u0001\\u001f"}',
    ],
)
def test_fingerprint_of_texts_that_need_the_careful_encoder(text: str) -> None:
    accepted = Intake(ANY_OBJECT, FP).accept(text)
    assert accepted.fingerprint == FP.fingerprint(json.loads(text))
    assert canonical_bytes(accepted.arguments) == canonical_bytes(json.loads(text))


def test_plain_texts_skip_the_careful_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    from charter.contracts import intake as intake_module

    def forbidden(value: Any) -> bytes:
        raise AssertionError("plain text went through the careful encoder")

    intake = Intake(SIX_FIELDS, FP)
    monkeypatch.setattr(intake_module, "canonical_bytes", forbidden)
    assert intake.accept(json.dumps(GOOD)).fingerprint == FP.fingerprint(GOOD)
    with pytest.raises(AssertionError):
        Intake(ANY_OBJECT, FP).accept(json.dumps({**GOOD, "age": 36.5}))


def test_check_value_accepts_nested_mappings() -> None:
    from types import MappingProxyType

    assert check_value({"a": MappingProxyType({"b": (1,)})}) == {"a": {"b": [1]}}


def test_encoding_errors_give_positions() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_arguments(b'{"a":"ok\xff"}')
    assert info.value.details["position"] == 8
    with pytest.raises(InvalidInput) as info:
        parse_arguments('{"a":"ok\ud800"}')
    assert info.value.details["position"] == 8


_TOKENS = st.sampled_from(
    [
        *("{", "}", "[", "]", ",", ":", " ", "1", "-0", "1.5", "2.0", "1e999", "NaN"),
        *("-Infinity", "true", "null", "12345678901234567", '"a"', '"b"', '"\\u0041"'),
        *('"\\ud800"', '"\\ud83d\\ude00"'),
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.text() | st.binary() | st.lists(_TOKENS, max_size=30).map("".join))
def test_parser_returns_a_clean_object_or_invalid_input(raw: str | bytes) -> None:
    try:
        out = parse_arguments(raw, limits=LIMITS)
    except InvalidInput as error:
        reason = error.reason
        assert reason.startswith("ARGS_")
        return
    assert type(out) is dict
    # whatever it accepts is canonical JSON that reads back as itself
    assert json.loads(canonical_bytes(out)) == out
    assert Intake(ANY_OBJECT, FP, limits=LIMITS).accept(raw).fingerprint == FP.fingerprint(out)
