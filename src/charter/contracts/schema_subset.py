"""What the schema subset is: allowed and refused keywords, formats, limits (DESIGN §2).

Data only; :mod:`charter.contracts.schema_check` enforces it and docs/contracts.md explains it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

ALLOWED_FORMATS: frozenset[str] = frozenset(
    {"date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6"}
)
"""Formats a schema may name; every one is asserted (not merely annotated) at validation."""

ANNOTATION_KEYWORDS: frozenset[str] = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
    | {"$comment"}
)
"""Keywords that describe but never constrain: accepted, and ignored by validation."""

SCHEMA_VALUED = frozenset({"additionalProperties", "items"})
SCHEMA_MAPS = frozenset({"properties", "$defs"})
SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
COUNTS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
FLAGS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
TEXTS = frozenset({"title", "description", "$comment"})
TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})

ALLOWED_KEYWORDS: frozenset[str] = frozenset(
    {"$schema", "$ref", "type", "enum", "const", "required", "multipleOf", "pattern", "format"}
    | SCHEMA_VALUED
    | SCHEMA_MAPS
    | SCHEMA_LISTS
    | COUNTS
    | BOUNDS
    | FLAGS
    | ANNOTATION_KEYWORDS
)
"""The documented subset of JSON Schema 2020-12 (DESIGN §2)."""

_NOT_IN_SUBSET = (
    "it is outside Charter's schema subset, which keeps to what model providers accept and "
    "what reviewers can read at a glance"
)
_CONDITIONAL = (
    "conditional schemas (if/then/else) are hard for models and reviewers to read; "
    "use oneOf or anyOf with explicit alternatives"
)
_DYNAMIC = "dynamic references resolve at run time, so a schema would mean different things"
_UNCHECKED = "it looks like a constraint but Draft 2020-12 never checks it"

REFUSED_KEYWORDS: Mapping[str, str] = {
    # core vocabulary
    "$id": "it changes the base URI, so references could resolve outside this schema",
    "$anchor": "anchors are not needed: reference definitions as #/$defs/<name>",
    "$dynamicRef": _DYNAMIC,
    "$dynamicAnchor": _DYNAMIC,
    "$vocabulary": "it belongs in meta-schemas; tool schemas use the fixed subset",
    # applicator vocabulary
    "if": _CONDITIONAL,
    "then": _CONDITIONAL,
    "else": _CONDITIONAL,
    "patternProperties": "property names chosen by a regular expression cannot be listed "
    "to a model; declare properties, or additionalProperties with one schema",
    "dependentSchemas": "schemas that switch on the presence of a property are refused; "
    "use oneOf with explicit alternatives",
    "propertyNames": _NOT_IN_SUBSET,
    "contains": _NOT_IN_SUBSET,
    "not": _NOT_IN_SUBSET + "; describe what is allowed instead",
    # unevaluated vocabulary
    "unevaluatedProperties": "it depends on annotations collected across subschemas; "
    "use additionalProperties",
    "unevaluatedItems": "it depends on annotations collected across subschemas; use items",
    # validation vocabulary
    "minContains": _NOT_IN_SUBSET,
    "maxContains": _NOT_IN_SUBSET,
    "dependentRequired": _NOT_IN_SUBSET + "; use oneOf with explicit alternatives",
    # content vocabulary
    "contentEncoding": _UNCHECKED,
    "contentMediaType": _UNCHECKED,
    "contentSchema": _UNCHECKED,
    # older drafts, a common source of copy-paste
    "definitions": "a pre-2020-12 keyword: use $defs",
    "dependencies": "a pre-2020-12 keyword (and its 2020-12 successors are refused too)",
    "additionalItems": "a pre-2020-12 keyword: use prefixItems with items",
    "$recursiveRef": "a 2019-09 keyword: " + _DYNAMIC,
    "$recursiveAnchor": "a 2019-09 keyword: " + _DYNAMIC,
}
"""Keywords of JSON Schema (2020-12 and older drafts) that are refused, with the reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaLimits:
    """Bounds on one schema, checked at build time (documented in docs/contracts.md)."""

    max_bytes: int = 64 * 1024
    """Size of the schema's canonical JSON."""
    max_depth: int = 32
    """Nesting of subschemas (the root is depth 0), and of data in enum/const/default."""
    max_properties: int = 256
    """Entries in one ``properties``, ``required`` or ``$defs``."""
    max_subschemas: int = 4096
    """Subschemas in the whole schema, the root included."""
    max_enum: int = 1024
    """Values in one ``enum``."""
    max_pattern_length: int = 1024
    """Characters in one ``pattern``."""


SCHEMA_LIMITS = SchemaLimits()
