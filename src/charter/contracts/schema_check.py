"""The build-time check of one schema against the subset (see :mod:`charter.contracts.schema`).

One walk collects every problem. Keys inside ``properties`` and ``$defs`` are names, not
keywords; ``enum``, ``const``, ``default`` and ``examples`` hold data that is never read as
schema. ``$ref`` must be ``#/$defs/<name>`` naming a root definition, and references may not
form a cycle that never steps into a property or item (such a cycle constrains nothing:
the validator would accept every value).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote

import jsonschema_rs
import re2

from charter.contracts.canonical import canonical_bytes
from charter.contracts.schema_subset import (
    ALLOWED_FORMATS,
    ALLOWED_KEYWORDS,
    BOUNDS,
    COUNTS,
    DRAFT_2020_12,
    FLAGS,
    REFUSED_KEYWORDS,
    SCHEMA_LIMITS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_VALUED,
    TEXTS,
    TYPES,
    SchemaLimits,
)
from charter.errors import CharterError, Problem

_LOCAL_REF = re.compile(r"^#/\$defs/([^/]+)$")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_VALIDATOR_ERRORS = (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError)


def build_validator(schema: Any) -> Any:
    """The one way Charter builds a validator: Draft 2020-12 whatever ``$schema`` says,
    formats asserted, unknown formats refused, the linear-time ``regex`` engine, and no
    retrieval of any reference."""
    return jsonschema_rs.Draft202012Validator(
        schema,
        validate_formats=True,
        ignore_unknown_formats=False,
        pattern_options=jsonschema_rs.RegexOptions(),
        offline=True,
    )


def escape(token: str) -> str:
    """One RFC 6901 reference token."""
    return token.replace("~", "~0").replace("/", "~1")


class _At(NamedTuple):
    """Where a keyword sits: its pointer (unprefixed), the nesting depth of its schema, the
    ``$defs`` entry (or ``'#'``) it belongs to, and whether its schema applies to the same
    instance as that entry (no property or item step in between)."""

    ptr: str
    depth: int
    owner: str
    inplace: bool


def _kind(value: object) -> str:
    names = {list: "an array", dict: "an object", str: "a string", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def _is_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _is_count(value: object) -> bool:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return value >= 0
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _data_problem(value: object, depth: int, max_depth: int) -> str | None:
    """Why ``value`` is not plain JSON data within ``max_depth`` levels, or None."""
    if depth > max_depth:
        return f"nests deeper than {max_depth} levels"
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "holds NaN or Infinity"
    if isinstance(value, list):
        for item in value:
            found = _data_problem(item, depth + 1, max_depth)
            if found:
                return found
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return "has an object key that is not a string"
            found = _data_problem(item, depth + 1, max_depth)
            if found:
                return found
        return None
    return f"holds a {type(value).__name__}, which is not JSON"


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is refused, or None. It must compile in RE2 (linear time: no
    backreferences, no lookaround) and in the engine that will run it."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"RE2 refuses it ({detail})"
    try:
        build_validator({"pattern": pattern})
    except _VALIDATOR_ERRORS:
        return "the validator's regex engine refuses it"
    return None


class _Checker:
    """One walk over one schema, collecting problems."""

    def __init__(
        self, root: object, *, tool: str | None, file: str | None, where: str, limits: SchemaLimits
    ) -> None:
        self.root = root
        self.tool = tool
        self.file = file
        self.prefix = f"/{escape(where)}" if where else ""
        self.limits = limits
        self.problems: list[Problem] = []
        self.subschemas = 0
        self.refs: list[tuple[str, str]] = []  # (pointer, target name) of every $ref
        self.inplace: dict[str, list[tuple[str, str]]] = {}  # owner -> same-instance refs

    def problem(self, ptr: str, keyword: str | None, message: str) -> None:
        self.problems.append(
            Problem(
                message=message,
                tool=self.tool,
                file=self.file,
                pointer=self.prefix + ptr,
                keyword=keyword,
            )
        )

    def schema(self, node: object, at: _At) -> None:
        self.subschemas += 1
        if self.subschemas == self.limits.max_subschemas + 1:
            self.problem(at.ptr, None, f"more than {self.limits.max_subschemas} subschemas")
        if self.subschemas > self.limits.max_subschemas or isinstance(node, bool):
            return
        if not isinstance(node, Mapping):
            self.problem(
                at.ptr, None, f"a schema must be an object or a boolean, not {_kind(node)}"
            )
            return
        if at.depth > self.limits.max_depth:
            self.problem(at.ptr, None, f"subschemas nest deeper than {self.limits.max_depth}")
            return
        for key, value in node.items():
            if not isinstance(key, str):
                self.problem(at.ptr, None, f"schema keys must be strings, not {_kind(key)}")
                continue
            here = at._replace(ptr=f"{at.ptr}/{escape(key)}")
            check = _KEYWORD_CHECKS.get(key)
            if check is not None:
                check(self, key, value, here)
            elif key in REFUSED_KEYWORDS:
                self.problem(here.ptr, key, f"keyword {key!r} is refused: {REFUSED_KEYWORDS[key]}")
            else:
                close = difflib.get_close_matches(key, sorted(ALLOWED_KEYWORDS), n=1, cutoff=0.75)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                self.problem(
                    here.ptr, key, f"unknown keyword {key!r}: not in the schema subset{hint}"
                )

    # Keyword checks share one signature so they can sit in one table.

    def k_schema(self, key: str, value: object, at: _At) -> None:
        if key == "items" and isinstance(value, list):
            self.problem(at.ptr, key, "items takes one schema in 2020-12; use prefixItems")
            return
        self.schema(value, _At(at.ptr, at.depth + 1, at.owner, False))

    def k_schema_map(self, key: str, value: object, at: _At) -> None:
        if key == "$defs" and at.ptr != "/$defs":
            self.problem(at.ptr, key, "$defs is allowed only at the root of a schema")
            return
        if not isinstance(value, Mapping):
            self.problem(at.ptr, key, f"{key} must be an object mapping names to schemas")
            return
        if len(value) > self.limits.max_properties:
            self.problem(at.ptr, key, f"{key} has more than {self.limits.max_properties} entries")
        for name, sub in value.items():
            if not isinstance(name, str):
                self.problem(at.ptr, key, f"names in {key} must be strings, not {_kind(name)}")
                continue
            ptr = f"{at.ptr}/{escape(name)}"
            if key == "$defs":
                self.schema(sub, _At(ptr, at.depth + 1, name, True))
            else:
                self.schema(sub, _At(ptr, at.depth + 1, at.owner, False))

    def k_schema_list(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, list) or not value:
            self.problem(at.ptr, key, f"{key} must be a non-empty array of schemas")
            return
        inplace = at.inplace and key != "prefixItems"
        for index, sub in enumerate(value):
            self.schema(sub, _At(f"{at.ptr}/{index}", at.depth + 1, at.owner, inplace))

    def k_ref(self, key: str, value: object, at: _At) -> None:
        match = _LOCAL_REF.match(value) if isinstance(value, str) else None
        if match is None:
            self.problem(
                at.ptr, key, "only local references of the form '#/$defs/<name>' are allowed"
            )
            return
        target = unquote(match.group(1)).replace("~1", "/").replace("~0", "~")
        self.refs.append((at.ptr, target))
        if at.inplace:
            self.inplace.setdefault(at.owner, []).append((at.ptr, target))

    def k_schema_uri(self, key: str, value: object, at: _At) -> None:
        if at.ptr != "/$schema":
            self.problem(at.ptr, key, "$schema is allowed only at the root of a schema")
        elif value not in (DRAFT_2020_12, DRAFT_2020_12 + "#"):
            self.problem(at.ptr, key, f"$schema must be {DRAFT_2020_12!r} (Draft 2020-12)")

    def k_type(self, key: str, value: object, at: _At) -> None:
        names = value if isinstance(value, list) else [value]
        if (
            not names
            or not all(isinstance(n, str) and n in TYPES for n in names)
            or len(set(names)) != len(names)
        ):
            self.problem(at.ptr, key, f"type must be one of {sorted(TYPES)} or an array of them")

    def k_required(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            self.problem(at.ptr, key, "required must be an array of property names")
        elif len(set(value)) != len(value):
            self.problem(at.ptr, key, "required names a property twice")
        elif len(value) > self.limits.max_properties:
            self.problem(at.ptr, key, f"required lists more than {self.limits.max_properties}")

    def k_enum(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, list) or not value:
            self.problem(at.ptr, key, "enum must be a non-empty array")
            return
        if len(value) > self.limits.max_enum:
            self.problem(at.ptr, key, f"enum has more than {self.limits.max_enum} values")
        self.k_data(key, value, at)

    def k_examples(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, list):
            self.problem(at.ptr, key, "examples must be an array")
            return
        self.k_data(key, value, at)

    def k_data(self, key: str, value: object, at: _At) -> None:
        found = _data_problem(value, 0, self.limits.max_depth)
        if found:
            self.problem(at.ptr, key, f"the value of {key} {found}")

    def k_count(self, key: str, value: object, at: _At) -> None:
        if not _is_count(value):
            self.problem(at.ptr, key, f"{key} must be a non-negative integer")

    def k_bound(self, key: str, value: object, at: _At) -> None:
        if not _is_number(value):
            self.problem(at.ptr, key, f"{key} must be a finite number")

    def k_multiple(self, key: str, value: object, at: _At) -> None:
        if not _is_number(value) or value <= 0:  # type: ignore[operator]
            self.problem(at.ptr, key, "multipleOf must be a number greater than 0")

    def k_flag(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, bool):
            self.problem(at.ptr, key, f"{key} must be true or false")

    def k_text(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, str):
            self.problem(at.ptr, key, f"{key} must be a string")

    def k_format(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, str):
            self.problem(at.ptr, key, "format must be a string")
        elif value not in ALLOWED_FORMATS:
            allowed = ", ".join(sorted(ALLOWED_FORMATS))
            self.problem(at.ptr, key, f"format {value!r} is not supported; use one of {allowed}")

    def k_pattern(self, key: str, value: object, at: _At) -> None:
        if not isinstance(value, str):
            self.problem(at.ptr, key, "pattern must be a string")
        elif len(value) > self.limits.max_pattern_length:
            limit = self.limits.max_pattern_length
            self.problem(at.ptr, key, f"pattern is longer than {limit} characters")
        elif reason := pattern_problem(value):
            self.problem(at.ptr, key, f"pattern cannot run in a linear-time engine: {reason}")

    def references(self) -> None:
        """Every ``$ref`` names a root definition, and no same-instance cycle exists."""
        defs = self.root.get("$defs") if isinstance(self.root, Mapping) else None
        names = set(defs) if isinstance(defs, Mapping) else set()
        for ptr, target in self.refs:
            if target not in names:
                self.problem(ptr, "$ref", f"reference points nowhere: no $defs entry {target!r}")
        state: dict[str, bool] = {}  # False while on the DFS stack, True once finished

        def visit(owner: str) -> None:
            state[owner] = False
            for ptr, target in self.inplace.get(owner, ()):
                if target not in names:
                    continue
                if state.get(target) is False:
                    self.problem(
                        ptr,
                        "$ref",
                        "reference cycle: this $ref reaches itself without stepping into a "
                        "property or item, so it would constrain nothing",
                    )
                elif target not in state:
                    visit(target)
            state[owner] = True

        for owner in ["#", *sorted(self.inplace)]:
            if owner not in state:
                visit(owner)


_Check = Callable[[_Checker, str, object, _At], None]
_KEYWORD_CHECKS: dict[str, _Check] = {
    **dict.fromkeys(SCHEMA_VALUED, _Checker.k_schema),
    **dict.fromkeys(SCHEMA_MAPS, _Checker.k_schema_map),
    **dict.fromkeys(SCHEMA_LISTS, _Checker.k_schema_list),
    **dict.fromkeys(COUNTS, _Checker.k_count),
    **dict.fromkeys(BOUNDS, _Checker.k_bound),
    **dict.fromkeys(FLAGS, _Checker.k_flag),
    **dict.fromkeys(TEXTS, _Checker.k_text),
    "$ref": _Checker.k_ref,
    "$schema": _Checker.k_schema_uri,
    "type": _Checker.k_type,
    "required": _Checker.k_required,
    "enum": _Checker.k_enum,
    "const": _Checker.k_data,
    "default": _Checker.k_data,
    "examples": _Checker.k_examples,
    "multipleOf": _Checker.k_multiple,
    "format": _Checker.k_format,
    "pattern": _Checker.k_pattern,
}
CHECKED_KEYWORDS = frozenset(_KEYWORD_CHECKS)
"""Keywords with a check; a test holds this equal to ALLOWED_KEYWORDS."""


def check_schema(
    schema: object,
    *,
    tool: str | None = None,
    file: str | None = None,
    where: str = "args_schema",
    require_object: bool | None = None,
    limits: SchemaLimits = SCHEMA_LIMITS,
) -> list[Problem]:
    """Every problem with ``schema`` (never just the first), each naming tool, file, keyword
    and the JSON pointer prefixed with ``/<where>`` (``/args_schema/properties/x/if``). An
    empty list means the schema is in the subset and :func:`compile_schema` accepts it.

    ``require_object`` (default: ``where == "args_schema"``) demands a root object schema
    with ``"type": "object"``: tool arguments are always a JSON object.
    """
    if require_object is None:
        require_object = where == "args_schema"
    checker = _Checker(schema, tool=tool, file=file, where=where, limits=limits)
    if require_object and not (isinstance(schema, Mapping) and schema.get("type") == "object"):
        checker.problem("", "type", 'an argument schema must be an object with "type": "object"')
    checker.schema(schema, _At("", 0, "#", True))
    checker.references()
    try:
        size: int | None = len(canonical_bytes(schema))
    except (CharterError, RecursionError, TypeError, ValueError):
        size = None
    if size is None and not checker.problems:
        checker.problem("", None, "the schema cannot be encoded as canonical JSON")
    elif size is not None and size > limits.max_bytes:
        checker.problem("", None, f"the schema is {size} bytes; the limit is {limits.max_bytes}")
    if not checker.problems:
        try:
            build_validator(schema)
        except _VALIDATOR_ERRORS as exc:
            text = str(exc).strip()
            first_line = text.splitlines()[0] if text else type(exc).__name__
            checker.problem("", None, f"the validator refuses the schema: {first_line}")
    return checker.problems
