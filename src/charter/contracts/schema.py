"""The schema subset: which JSON Schema 2020-12 a tool contract may use, checked and compiled.

Charter accepts a documented part of JSON Schema Draft 2020-12 (DESIGN §2, ``docs/contracts.md``)
and refuses the rest when a Build is made, so that every schema in a Build means the same thing
to the model, to Charter's validator and to a human reader:

* :func:`check_schema` walks a schema and returns **every** problem it finds — an unknown or
  refused keyword, a ``$ref`` that is not a local ``#/$defs/...`` reference or points nowhere, a
  ``pattern`` that the linear-time RE2 engine cannot compile, a ``format`` outside
  :data:`ALLOWED_FORMATS`, a malformed keyword value, an exceeded :class:`SchemaLimits` — each as
  a :class:`~charter.errors.Problem` naming the keyword and its JSON pointer.
* :func:`compile_schema` turns a checked schema into a :class:`CompiledSchema` (a
  ``jsonschema_rs`` Draft 2020-12 validator with format assertion on, the linear ``regex``
  engine and no network) whose :meth:`~CompiledSchema.first_error` reports where and which
  keyword failed, in words that never contain the instance's values.

The subset itself (keyword lists, formats, limits) lives in :mod:`charter.contracts.schema_subset`
and the build-time walk in :mod:`charter.contracts.schema_check`; this module is the façade the
rest of Charter imports, plus the compiled validators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import jsonschema_rs

from charter.contracts.schema_check import build_validator, check_schema, escape
from charter.contracts.schema_subset import (
    ALLOWED_FORMATS,
    ALLOWED_KEYWORDS,
    ANNOTATION_KEYWORDS,
    DRAFT_2020_12,
    REFUSED_KEYWORDS,
    SCHEMA_LIMITS,
    SchemaLimits,
)
from charter.errors import ContractError

__all__ = [
    "ALLOWED_FORMATS",
    "ALLOWED_KEYWORDS",
    "ANNOTATION_KEYWORDS",
    "DRAFT_2020_12",
    "REFUSED_KEYWORDS",
    "SCHEMA_LIMITS",
    "CompiledSchema",
    "SchemaLimits",
    "SchemaViolation",
    "check_schema",
    "compile_schema",
    "json_pointer",
]


def json_pointer(path: Sequence[str | int]) -> str:
    """The RFC 6901 pointer for a path of keys and indexes (``""`` is the whole document)."""
    return "".join("/" + escape(str(part)) for part in path)


# ---------------------------------------------------------------------------------------
# Compiled validators


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaViolation:
    """Where an instance failed its schema. ``message`` never contains instance values."""

    pointer: str
    keyword: str
    message: str
    schema_pointer: str = ""


class CompiledSchema:
    """A schema compiled once; validating an instance costs a few microseconds."""

    __slots__ = ("_is_valid", "_validate", "schema")

    def __init__(
        self, schema: Mapping[str, Any] | bool, validator: jsonschema_rs.Validator
    ) -> None:
        self.schema = schema
        self._is_valid = validator.is_valid
        self._validate = validator.validate

    def is_valid(self, value: object) -> bool:
        """True when ``value`` (a JSON value) satisfies the schema."""
        try:
            return bool(self._is_valid(value))
        except ValueError as exc:  # unsupported Python type: not a JSON value
            raise TypeError(f"not a JSON value: {exc}") from None

    def first_error(self, value: object) -> SchemaViolation | None:
        """The first violation, or ``None`` when ``value`` is valid."""
        if self.is_valid(value):
            return None
        try:
            self._validate(value)
        except jsonschema_rs.ValidationError as error:
            return _violation(error)
        return None  # pragma: no cover - is_valid and validate agree


def compile_schema(
    schema: Mapping[str, Any] | bool,
    *,
    where: str = "",
    require_object: bool = False,
    limits: SchemaLimits = SCHEMA_LIMITS,
) -> CompiledSchema:
    """Compile a schema of the subset. A schema outside it raises :class:`ContractError`
    with the first problem (callers making a Build use :func:`check_schema` to list all)."""
    problems = check_schema(schema, where=where, require_object=require_object, limits=limits)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ContractError(first.message + more, pointer=first.pointer, keyword=first.keyword)
    # ``true``/``false`` are whole schemas too (a result schema may be ``true``).
    plain = dict(schema) if isinstance(schema, Mapping) else schema
    return CompiledSchema(schema, build_validator(plain))


def _number(value: object) -> str:
    if type(value) is float and value.is_integer():
        return str(int(value))
    return str(value)


def _violation(error: jsonschema_rs.ValidationError) -> SchemaViolation:
    kind: Any = error.kind
    keyword = kind.name
    path = list(error.instance_path)
    message: str
    if keyword == "type":
        message = "expected " + " or ".join(kind.types)
    elif keyword == "required":
        message = f"missing required property {kind.property!r}"
    elif keyword == "additionalProperties":
        unexpected = list(kind.unexpected)
        if unexpected:
            path.append(unexpected[0])
        message = "property is not allowed here"
    elif keyword == "falseSchema":
        keyword = "false"
        message = "no value is allowed here"
    elif keyword == "enum":
        message = "not one of the allowed values"
    elif keyword == "const":
        message = "not the required constant"
    elif keyword == "format":
        message = f"not a valid {kind.format}"
    elif keyword == "pattern":
        message = f"does not match the pattern {kind.pattern!r}"
    elif keyword in _LIMIT_WORDS:
        message = _LIMIT_WORDS[keyword].format(_number(kind.limit))
    elif keyword == "multipleOf":
        message = f"must be a multiple of {_number(kind.multiple_of)}"
    elif keyword == "uniqueItems":
        message = "items must be unique"
    elif keyword == "anyOf":
        message = "matches none of the allowed alternatives"
    elif keyword == "oneOf":
        if type(kind).__name__ == "OneOfMultipleValid":
            message = "matches more than one alternative"
        else:
            message = "matches none of the alternatives"
    else:
        message = "fails this keyword"
    return SchemaViolation(
        pointer=json_pointer(path),
        keyword=keyword,
        message=message,
        schema_pointer=json_pointer(list(error.schema_path)),
    )


_LIMIT_WORDS: Final[Mapping[str, str]] = {
    "minimum": "must be at least {}",
    "maximum": "must be at most {}",
    "exclusiveMinimum": "must be greater than {}",
    "exclusiveMaximum": "must be less than {}",
    "minLength": "must be at least {} characters long",
    "maxLength": "must be at most {} characters long",
    "minItems": "must have at least {} items",
    "maxItems": "must have at most {} items",
    "minProperties": "must have at least {} properties",
    "maxProperties": "must have at most {} properties",
}
