"""The schema subset: every Draft 2020-12 keyword is either accepted and enforced, or refused
at build time with its pointer; patterns run in linear time; formats are really checked."""

from __future__ import annotations

import threading
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema_specifications import REGISTRY

from charter.contracts import schema as schema_module
from charter.contracts.schema import (
    ALLOWED_FORMATS,
    ALLOWED_KEYWORDS,
    ANNOTATION_KEYWORDS,
    DRAFT_2020_12,
    REFUSED_KEYWORDS,
    SchemaLimits,
    check_schema,
    compile_schema,
)
from charter.errors import ContractError, Problem

VOCABULARIES = (
    "core",
    "applicator",
    "unevaluated",
    "validation",
    "meta-data",
    "format-annotation",
    "content",
)


def vocabulary_keywords() -> dict[str, str]:
    """keyword -> vocabulary, read from the official 2020-12 vocabulary meta-schemas."""
    out: dict[str, str] = {}
    for vocabulary in VOCABULARIES:
        meta = REGISTRY.contents(f"https://json-schema.org/draft/2020-12/meta/{vocabulary}")
        for keyword in meta["properties"]:
            out[keyword] = vocabulary
    return out


DRAFT_KEYWORDS = vocabulary_keywords()

# keyword -> (schema, a valid instance, an invalid instance)
ENFORCED: dict[str, tuple[dict[str, Any], Any, Any]] = {
    "$schema": ({"$schema": DRAFT_2020_12, "type": "integer"}, 1, "1"),
    "$ref": ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, 1, "1"),
    "$defs": ({"$defs": {"n": {"minimum": 2}}, "items": {"$ref": "#/$defs/n"}}, [2, 3], [2, 1]),
    "prefixItems": ({"prefixItems": [{"type": "integer"}]}, [1, "x"], ["x", 1]),
    "items": ({"items": {"type": "integer"}}, [1, 2], [1, "2"]),
    "additionalProperties": (
        {"properties": {"a": {}}, "additionalProperties": False},
        {"a": 1},
        {"a": 1, "b": 2},
    ),
    "properties": ({"properties": {"a": {"type": "integer"}}}, {"a": 1, "b": "x"}, {"a": "x"}),
    "allOf": ({"allOf": [{"minimum": 1}, {"maximum": 3}]}, 2, 4),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "x", None),
    "oneOf": ({"oneOf": [{"minimum": 1}, {"maximum": 3}]}, 5, 2),
    "type": ({"type": "integer"}, 1.0, True),
    "const": ({"const": {"a": [1]}}, {"a": [1.0]}, {"a": [2]}),
    "enum": ({"enum": ["a", 1]}, 1, "b"),
    "multipleOf": ({"multipleOf": 0.5}, 1.5, 1.2),
    "maximum": ({"maximum": 3}, 3, 3.5),
    "exclusiveMaximum": ({"exclusiveMaximum": 3}, 2.5, 3),
    "minimum": ({"minimum": 3}, 3, 2),
    "exclusiveMinimum": ({"exclusiveMinimum": 3}, 3.5, 3),
    "maxLength": ({"maxLength": 2}, "😀😀", "abc"),
    "minLength": ({"minLength": 2}, "😀😀", "😀"),
    "pattern": ({"pattern": "^[a-z]+$"}, "abc", "aBc"),
    "maxItems": ({"maxItems": 1}, [1], [1, 2]),
    "minItems": ({"minItems": 1}, [1], []),
    "uniqueItems": ({"uniqueItems": True}, [1, 2], [1, 1.0]),
    "maxProperties": ({"maxProperties": 1}, {"a": 1}, {"a": 1, "b": 2}),
    "minProperties": ({"minProperties": 1}, {"a": 1}, {}),
    "required": ({"required": ["a"]}, {"a": None}, {"b": 1}),
    "format": ({"format": "uuid"}, "123e4567-e89b-12d3-a456-426614174000", "not-a-uuid"),
}

ANNOTATION_SAMPLES: dict[str, Any] = {
    "$comment": "for reviewers",
    "title": "Count",
    "description": "How many",
    "default": 3,
    "deprecated": True,
    "readOnly": True,
    "writeOnly": False,
    "examples": [1, 2],
}

REFUSED_SAMPLES: dict[str, Any] = {
    "$id": "https://example.com/s",
    "$anchor": "here",
    "$dynamicRef": "#meta",
    "$dynamicAnchor": "meta",
    "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True},
    "contains": {"type": "integer"},
    "minContains": 1,
    "maxContains": 2,
    "if": {"type": "integer"},
    "then": {"minimum": 1},
    "else": {"type": "string"},
    "not": {"type": "null"},
    "patternProperties": {"^a": {"type": "integer"}},
    "dependentSchemas": {"a": {"required": ["b"]}},
    "propertyNames": {"maxLength": 3},
    "unevaluatedProperties": False,
    "unevaluatedItems": False,
    "dependentRequired": {"a": ["b"]},
    "contentEncoding": "base64",
    "contentMediaType": "application/json",
    "contentSchema": {"type": "object"},
}


def reference_valid(schema: dict[str, Any], instance: Any) -> bool:
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    return bool(validator.is_valid(instance))


def one_problem(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, problems
    return problems[0]


# ---------------------------------------------------------------------------------------
# The whole vocabulary


def test_every_draft_keyword_is_classified_exactly_once() -> None:
    assert len(DRAFT_KEYWORDS) >= 55  # the seven vocabularies, read from the meta-schemas
    for keyword in DRAFT_KEYWORDS:
        in_allowed, in_refused = keyword in ALLOWED_KEYWORDS, keyword in REFUSED_KEYWORDS
        assert in_allowed != in_refused, keyword
    assert set(ALLOWED_KEYWORDS) <= set(DRAFT_KEYWORDS), "the subset invents no keyword"
    tested = set(ENFORCED) | set(ANNOTATION_SAMPLES) | set(REFUSED_SAMPLES)
    assert tested == set(DRAFT_KEYWORDS)
    assert set(ANNOTATION_SAMPLES) == set(ANNOTATION_KEYWORDS)


@pytest.mark.parametrize("keyword", sorted(ENFORCED))
def test_accepted_keyword_is_enforced(keyword: str) -> None:
    schema, good, bad = ENFORCED[keyword]
    assert check_schema(schema, where="result_schema") == []
    compiled = compile_schema(schema)
    assert compiled.is_valid(good)
    assert compiled.first_error(good) is None
    assert not compiled.is_valid(bad)
    violation = compiled.first_error(bad)
    assert violation is not None
    assert reference_valid(schema, good)
    if keyword != "format":  # the reference checks uuid only with optional packages
        assert not reference_valid(schema, bad)


@pytest.mark.parametrize("keyword", sorted(ANNOTATION_SAMPLES))
def test_annotation_is_accepted_and_changes_nothing(keyword: str) -> None:
    schema = {"type": "integer", keyword: ANNOTATION_SAMPLES[keyword]}
    assert check_schema(schema, where="result_schema") == []
    compiled = compile_schema(schema)
    for instance, expected in [(1, True), (2.0, True), ("x", False), (None, False)]:
        assert compiled.is_valid(instance) is expected


@pytest.mark.parametrize("keyword", sorted(REFUSED_SAMPLES))
def test_refused_keyword_names_itself_and_its_pointer(keyword: str) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer", keyword: REFUSED_SAMPLES[keyword]}},
    }
    problems = check_schema(schema, tool="demo.tool", file="tools/demo.yaml")
    problem = next(p for p in problems if p.keyword == keyword)
    assert problem.pointer == f"/args_schema/properties/x/{keyword.replace('/', '~1')}"
    assert problem.tool == "demo.tool"
    assert problem.file == "tools/demo.yaml"
    assert keyword in problem.message
    assert keyword in str(problem)
    assert "demo.tool" in str(problem)
    with pytest.raises(ContractError) as info:
        compile_schema(schema)
    assert info.value.keyword == keyword


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("definitions", {"a": {}}),
        ("dependencies", {"a": ["b"]}),
        ("additionalItems", False),
        ("$recursiveRef", "#"),
        ("$recursiveAnchor", True),
    ],
)
def test_older_draft_keywords_are_refused(keyword: str, value: Any) -> None:
    problem = one_problem(check_schema({keyword: value}, where="result_schema"))
    assert problem.keyword == keyword
    assert problem.pointer == f"/result_schema/{keyword}"


# ---------------------------------------------------------------------------------------
# Names, data and typos


def test_property_names_that_look_like_keywords_are_names() -> None:
    schema = {
        "type": "object",
        "properties": {
            "if": {"type": "string"},
            "patternProperties": {"type": "integer"},
            "$ref": {"type": "boolean"},
            "requried": {"type": "null"},
        },
        "required": ["if", "$ref"],
        "$defs": {"not": {"type": "string"}, "then": {"$ref": "#/$defs/not"}},
    }
    assert check_schema(schema) == []
    compiled = compile_schema(schema)
    assert compiled.is_valid({"if": "x", "$ref": True})
    assert not compiled.is_valid({"if": 1, "$ref": True})


def test_data_keywords_hold_data_not_schemas() -> None:
    schema = {
        "const": {"if": 1, "$ref": "https://example.com"},
        "default": {"patternProperties": {}},
        "examples": [{"unevaluatedItems": False}],
        "enum": [{"if": 1, "$ref": "https://example.com"}, {"$dynamicRef": "#x"}],
    }
    assert check_schema(schema, where="result_schema") == []


def test_typos_are_unknown_keywords_with_a_suggestion() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLenght": 1}},
        "requried": ["name"],
    }
    problems = check_schema(schema, tool="t")
    assert {(p.pointer, p.keyword) for p in problems} == {
        ("/args_schema/properties/name/minLenght", "minLenght"),
        ("/args_schema/requried", "requried"),
    }
    by_keyword = {p.keyword: p.message for p in problems}
    assert "'required'" in by_keyword["requried"]
    assert "'minLength'" in by_keyword["minLenght"]


def test_every_problem_is_reported_not_just_the_first() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"if": {}},
            "b": {"patternProperties": {}},
            "c": {"$ref": "https://example.com/remote.json"},
            "d": {"format": "hostname"},
            "e": {"pattern": "(?=x)"},
            "f": {"type": "strin"},
        },
        "unevaluatedProperties": False,
    }
    problems = check_schema(schema, tool="x.y", file="tools/x.yaml", where="args_schema")
    assert {p.pointer for p in problems} == {
        "/args_schema/properties/a/if",
        "/args_schema/properties/b/patternProperties",
        "/args_schema/properties/c/$ref",
        "/args_schema/properties/d/format",
        "/args_schema/properties/e/pattern",
        "/args_schema/properties/f/type",
        "/args_schema/unevaluatedProperties",
    }
    assert all(p.tool == "x.y" and p.file == "tools/x.yaml" for p in problems)


def test_pointer_tokens_are_escaped() -> None:
    schema = {"properties": {"a/b~c": {"if": {}}}}
    problem = one_problem(check_schema(schema, where="result_schema"))
    assert problem.pointer == "/result_schema/properties/a~1b~0c/if"


def test_pydantic_generated_schema_is_in_the_subset() -> None:
    import datetime
    import enum
    import uuid
    from typing import Literal

    from pydantic import BaseModel, Field

    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    class Node(BaseModel):
        name: str
        children: list[Node] = []

    class Args(BaseModel):
        when: datetime.datetime
        day: datetime.date
        id: uuid.UUID
        kind: Literal["a", "b"]
        color: Color = Color.RED
        note: str | None = None
        count: int = Field(ge=0, le=10)
        tags: set[str] = set()
        pair: tuple[int, str]
        tree: Node
        extra: dict[str, float] = {}
        code: str = Field(pattern=r"^[A-Z]{3}$")

    schema = Args.model_json_schema()
    assert check_schema(schema) == []
    compiled = compile_schema(schema)
    good = {
        "when": "2024-05-01T10:00:00Z",
        "day": "2024-05-01",
        "id": "123e4567-e89b-12d3-a456-426614174000",
        "kind": "a",
        "count": 3,
        "pair": [1, "x"],
        "tree": {"name": "root", "children": [{"name": "leaf"}]},
        "code": "ABC",
    }
    assert compiled.is_valid(good)
    deep_bad = {**good, "tree": {"name": "root", "children": [{"name": 7}]}}
    violation = compiled.first_error(deep_bad)
    assert violation is not None
    assert violation.pointer == "/tree/children/0/name"
    assert violation.keyword == "type"


# ---------------------------------------------------------------------------------------
# Root, values of keywords, references


@pytest.mark.parametrize(
    "schema",
    [True, False, [], "object", {"type": "string"}, {"properties": {}}, {"type": ["object"]}],
)
def test_argument_schema_must_be_an_object_schema(schema: Any) -> None:
    problems = check_schema(schema, tool="t", where="args_schema")
    assert problems
    assert problems[0].pointer == "/args_schema"


@pytest.mark.parametrize("schema", [True, {"type": "string"}, {"type": ["array", "null"]}])
def test_result_schema_may_be_any_schema(schema: Any) -> None:
    assert check_schema(schema, where="result_schema") == []


@pytest.mark.parametrize(
    ("fragment", "keyword"),
    [
        ({"type": "strng"}, "type"),
        ({"type": []}, "type"),
        ({"type": ["string", "string"]}, "type"),
        ({"required": "a"}, "required"),
        ({"required": ["a", "a"]}, "required"),
        ({"minimum": "1"}, "minimum"),
        ({"maximum": True}, "maximum"),
        ({"minLength": -1}, "minLength"),
        ({"maxItems": 1.5}, "maxItems"),
        ({"multipleOf": 0}, "multipleOf"),
        ({"uniqueItems": "yes"}, "uniqueItems"),
        ({"title": 3}, "title"),
        ({"items": [{"type": "string"}]}, "items"),
        ({"anyOf": []}, "anyOf"),
        ({"properties": []}, "properties"),
        ({"enum": []}, "enum"),
        ({"examples": 1}, "examples"),
        ({"const": float("nan")}, "const"),
        ({"default": {1: "x"}}, "default"),
        ({"enum": [{"a": {1, 2}}]}, "enum"),
        ({"format": 3}, "format"),
        ({"format": "hostname"}, "format"),
        ({"pattern": 3}, "pattern"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "$schema"),
    ],
)
def test_malformed_keyword_values_are_problems(fragment: dict[str, Any], keyword: str) -> None:
    schema = {"type": "object", "properties": {"x": fragment}}
    problem = one_problem(check_schema(schema))
    assert problem.keyword == keyword
    assert problem.pointer == f"/args_schema/properties/x/{keyword}"


def test_nested_defs_and_schema_are_refused() -> None:
    schema = {
        "properties": {
            "x": {"$defs": {"a": {}}},
            "y": {"$schema": DRAFT_2020_12},
        }
    }
    problems = check_schema(schema, where="s")
    assert {(p.pointer, p.keyword) for p in problems} == {
        ("/s/properties/x/$defs", "$defs"),
        ("/s/properties/y/$schema", "$schema"),
    }


def test_schema_keys_and_subschemas_must_be_json() -> None:
    problems = check_schema({1: "x", "items": 3, "properties": {"a": None}}, where="s")
    assert {p.pointer for p in problems} == {"/s", "/s/items", "/s/properties/a"}


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/schema.json",
        "other.json#/$defs/a",
        "#/definitions/a",
        "#anchor",
        "#",
        "#/$defs/a/properties/b",
        "#/properties/a",
        3,
    ],
)
def test_only_local_defs_references_are_allowed(ref: Any) -> None:
    schema = {"$defs": {"a": {"properties": {"b": {}}}}, "properties": {"x": {"$ref": ref}}}
    problem = one_problem(check_schema(schema, tool="t", where="args_schema", require_object=False))
    assert problem.keyword == "$ref"
    assert problem.pointer == "/args_schema/properties/x/$ref"


def test_reference_must_point_somewhere() -> None:
    schema = {"$defs": {"a": {}}, "properties": {"x": {"$ref": "#/$defs/b"}}}
    problem = one_problem(check_schema(schema, where="s"))
    assert problem.keyword == "$ref"
    assert problem.pointer == "/s/properties/x/$ref"
    assert "'b'" in problem.message


def test_reference_names_are_unescaped() -> None:
    schema = {
        "$defs": {"a/b": {"type": "integer"}, "c d%": {"type": "string"}},
        "properties": {"x": {"$ref": "#/$defs/a~1b"}, "y": {"$ref": "#/$defs/c%20d%25"}},
    }
    assert check_schema(schema, where="s") == []
    compiled = compile_schema(schema)
    assert compiled.is_valid({"x": 1, "y": "s"})
    assert not compiled.is_valid({"x": "1"})
    assert not compiled.is_valid({"y": 1})


def test_reference_cycles_that_constrain_nothing_are_refused() -> None:
    schema = {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
        "$ref": "#/$defs/a",
    }
    problems = check_schema(schema, where="s")
    assert [p.keyword for p in problems] == ["$ref"]
    self_loop = {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}
    assert [p.keyword for p in check_schema(self_loop, where="s")] == ["$ref"]


def test_recursive_schema_through_properties_is_fine_and_enforced() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    assert check_schema(schema, where="s") == []
    compiled = compile_schema(schema)
    assert compiled.is_valid({"v": 1, "next": {"v": 2, "next": {"v": 3}}})
    violation = compiled.first_error({"v": 1, "next": {"v": 2, "next": {"v": "3"}}})
    assert violation is not None
    assert violation.pointer == "/next/next/v"


# ---------------------------------------------------------------------------------------
# Patterns and formats


@pytest.mark.parametrize(
    "pattern",
    [r"(a)\1", r"(?=a)b", r"(?!a)b", r"(?<=a)b", r"(?<!a)b", r"a++", r"\Z"],
)
def test_patterns_outside_linear_time_are_refused(pattern: str) -> None:
    problem = one_problem(check_schema({"pattern": pattern}, where="s"))
    assert problem.keyword == "pattern"
    assert problem.pointer == "/s/pattern"
    assert "linear" in problem.message


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    compiled = compile_schema({"type": "string", "pattern": "^(a+)+$"})
    adversarial = "a" * 100_000 + "!"
    outcome: list[bool] = []
    worker = threading.Thread(target=lambda: outcome.append(compiled.is_valid(adversarial)))
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "pattern validation did not finish: not linear time"
    assert outcome == [False]
    assert compiled.is_valid("a" * 100_000)


FORMAT_SAMPLES: dict[str, tuple[list[str], list[str]]] = {
    "date-time": (
        ["2024-01-01T10:00:00Z", "2024-02-29T23:59:59.123+01:00"],
        ["2024-01-01T10:00:00", "2024-13-01T10:00:00Z", "2024-01-01 10:00:00Z", "tomorrow"],
    ),
    "date": (["2024-02-29", "1999-12-31"], ["2023-02-29", "2024-1-1", "20240101", "2024-01-01T00"]),
    "time": (["10:00:00Z", "23:59:59.5+01:00"], ["10:00:00", "25:00:00Z", "10:00"]),
    "email": (["ada@example.com", "a.b+c@d.org"], ["ada", "@example.com", "ada@", "a b@c.d"]),
    "uri": (
        ["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:ada@example.com"],
        ["/relative/path", "example.com", "//example.com/x", "http://exa mple.com"],
    ),
    "uuid": (
        ["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"],
        ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", "x"],
    ),
    "ipv4": (["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4/24"]),
    "ipv6": (["::1", "2001:db8::8a2e:370:7334"], ["1.2.3.4", ":::1", "2001:db8::g", "::1/128"]),
}


def test_format_samples_cover_every_allowed_format() -> None:
    assert set(FORMAT_SAMPLES) == set(ALLOWED_FORMATS)


@pytest.mark.parametrize("fmt", sorted(FORMAT_SAMPLES))
def test_every_allowed_format_is_enforced(fmt: str) -> None:
    compiled = compile_schema({"type": "string", "format": fmt})
    good, bad = FORMAT_SAMPLES[fmt]
    for value in good:
        assert compiled.is_valid(value), (fmt, value)
    for value in bad:
        violation = compiled.first_error(value)
        assert violation is not None, (fmt, value)
        assert violation.keyword == "format"
        assert value not in violation.message
    # format constrains strings only (2020-12): other types pass the format keyword
    assert compile_schema({"format": fmt}).is_valid(42)


# ---------------------------------------------------------------------------------------
# Limits


def test_depth_limit() -> None:
    limits = SchemaLimits(max_depth=3)
    ok: dict[str, Any] = {"type": "integer"}
    for _ in range(3):
        ok = {"items": ok}
    assert check_schema(ok, where="s", limits=limits) == []
    problem = one_problem(check_schema({"items": ok}, where="s", limits=limits))
    assert problem.pointer == "/s/items/items/items/items"
    assert "3" in problem.message


def test_very_deep_schema_is_a_problem_not_a_crash() -> None:
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(5000):
        deep = {"items": deep}
    problems = check_schema(deep, where="s")
    assert problems
    assert any("nest deeper" in p.message for p in problems)


def test_property_count_limit() -> None:
    limits = SchemaLimits(max_properties=3)
    props = {f"p{i}": {"type": "integer"} for i in range(4)}
    problems = check_schema({"type": "object", "properties": props}, limits=limits)
    assert [(p.pointer, p.keyword) for p in problems] == [("/args_schema/properties", "properties")]
    problems = check_schema({"type": "object", "required": ["a", "b", "c", "d"]}, limits=limits)
    assert [p.keyword for p in problems] == ["required"]


def test_size_limit() -> None:
    schema = {"type": "object", "description": "x" * 2000}
    assert check_schema(schema) == []
    problem = one_problem(check_schema(schema, limits=SchemaLimits(max_bytes=1000)))
    assert problem.pointer == "/args_schema"
    assert "1000" in problem.message


def test_enum_pattern_and_subschema_limits() -> None:
    limits = SchemaLimits(max_enum=2, max_pattern_length=5, max_subschemas=4)
    assert [p.keyword for p in check_schema({"enum": [1, 2, 3]}, where="s", limits=limits)] == [
        "enum"
    ]
    assert [p.keyword for p in check_schema({"pattern": "abcdef"}, where="s", limits=limits)] == [
        "pattern"
    ]
    wide = {"anyOf": [{"type": "integer"}] * 5}
    assert len(check_schema(wide, where="s", limits=limits)) == 1


def test_default_limits_are_documented_values() -> None:
    limits = schema_module.SCHEMA_LIMITS
    assert limits.max_bytes == 64 * 1024
    assert limits.max_depth == 32
    assert limits.max_properties == 256


# ---------------------------------------------------------------------------------------
# Compiled schemas


def test_draft_2020_12_number_semantics() -> None:
    compiled = compile_schema({"type": "integer"})
    assert compiled.is_valid(1)
    assert compiled.is_valid(1.0)
    assert not compiled.is_valid(True)
    assert not compiled.is_valid(1.5)
    assert not compile_schema({"type": "number"}).is_valid(False)


def test_compile_refuses_a_schema_outside_the_subset() -> None:
    with pytest.raises(ContractError) as info:
        compile_schema({"properties": {"x": {"if": {}, "then": {}}}})
    assert info.value.keyword == "if"
    assert info.value.pointer is not None
    assert info.value.pointer.endswith("/properties/x/if")
    assert "1 more" in str(info.value)


SECRET = "S3CR3T-do-not-echo"


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer"}, SECRET),
        ({"enum": ["a"]}, SECRET),
        ({"const": "a"}, SECRET),
        ({"format": "email"}, SECRET),
        ({"format": "date-time"}, SECRET),
        ({"pattern": "^a$"}, SECRET),
        ({"maxLength": 3}, SECRET),
        ({"properties": {"k": {"type": "integer"}}}, {"k": SECRET}),
        ({"items": {"type": "integer"}}, [SECRET]),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, SECRET),
        ({"oneOf": [{"type": "integer"}, {"type": "null"}]}, SECRET),
        ({"allOf": [{"minLength": 100}]}, SECRET),
        ({"uniqueItems": True}, [SECRET, SECRET]),
        ({"maxItems": 0}, [SECRET]),
        ({"properties": {"k": False}}, {"k": SECRET}),
        ({"maxProperties": 0}, {"k": SECRET}),
        ({"multipleOf": 7}, 123456789),
        ({"minimum": 1e300}, 987654321),
    ],
)
def test_violation_messages_never_contain_the_value(schema: dict[str, Any], instance: Any) -> None:
    violation = compile_schema(schema).first_error(instance)
    assert violation is not None
    text = f"{violation.message} {violation.pointer} {violation.keyword}"
    assert "S3CR3T" not in text
    assert "123456789" not in text
    assert "987654321" not in text


# ---------------------------------------------------------------------------------------
# Robustness: check_schema reports, it never crashes; an empty report means it compiles

_KEYS = st.sampled_from(
    sorted(ALLOWED_KEYWORDS | set(REFUSED_KEYWORDS) | {"requried", "x", "a/b", "$defs"})
)
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(
        ["integer", "string", "object", "#/$defs/a", "#/$defs/b", "^a+$", "(?=a)", "email", "x"]
    )
)
_SCHEMAS = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_KEYS, inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "if"]), inner, max_size=2)
    ),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(_SCHEMAS)
def test_check_schema_never_crashes_and_clean_means_compilable(schema: Any) -> None:
    problems = check_schema(schema, where="s", require_object=False)
    assert all(isinstance(p, Problem) for p in problems)
    assert all(p.pointer is not None and p.pointer.startswith("/s") for p in problems)
    if not problems:
        compiled = compile_schema(schema)
        compiled.is_valid({"a": 1})
        compiled.first_error([1, "x", None])


def test_boolean_schemas_compile() -> None:
    assert compile_schema(True).is_valid({"anything": [1]})
    assert not compile_schema(False).is_valid(None)
    violation = compile_schema(False).first_error(1)
    assert violation is not None
    assert violation.keyword == "false"
