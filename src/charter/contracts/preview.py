"""Argument previews and shapes: what a person, an event or a row sees of a call's arguments.

Two views of an (already redacted) argument document, both pure:

- :func:`shape` — field paths, JSON types and sizes, never a value: what events and call
  rows keep of the arguments (``{"/query": "string:19", "/limit": "integer", ...}``).
- :func:`preview` — the redacted arguments themselves while they fit the size budget; over
  it, every field path with its type and size and its value cut per field (an approver
  still sees the write target's path, and how big the rest is).

Sizes: strings in UTF-8 bytes, arrays in items, objects in properties. Paths are RFC 6901
JSON pointers. Over :data:`MAX_FIELDS` leaf paths, a listing stops with ``omittedFields``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from charter.contracts.canonical import canonical_bytes

MAX_FIELDS = 256  # leaf paths listed in a shape or an oversize preview
FIELD_CHARS = 64  # an oversize preview keeps this many characters of each string
ELLIPSIS = "…"


def _escape(token: str) -> str:
    if "~" not in token and "/" not in token:
        return token
    return token.replace("~", "~0").replace("/", "~1")


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _size(value: Any) -> int | None:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, Mapping | list | tuple):
        return len(value)
    return None


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(pointer, value)`` for every leaf and every empty container, depth first."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, Mapping) and item:
            stack.extend((f"{where}/{_escape(str(k))}", v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list | tuple) and item:
            stack.extend((f"{where}/{i}", v) for i, v in reversed(list(enumerate(item))))
        else:
            yield where, item


def _describe(value: Any) -> str:
    kind = json_type(value)
    size = _size(value)
    return kind if size is None else f"{kind}:{size}"


def _flat_fields(value: Any) -> dict[str, str] | None:
    """:func:`shape`'s fields of a non-empty ``dict`` of at most :data:`MAX_FIELDS` string,
    number, boolean and ``None`` values, as :func:`walk` and :func:`_describe` list them
    (in order); ``None`` for anything else (which takes the general path)."""
    if type(value) is not dict or not value or len(value) > MAX_FIELDS:
        return None
    fields: dict[str, str] = {}
    pointers = _POINTERS
    for key, leaf in value.items():
        kind = type(leaf)
        if kind is str:
            # (an ASCII string's UTF-8 size is its length)
            size = len(leaf) if leaf.isascii() else len(leaf.encode("utf-8", "surrogatepass"))
            described = f"string:{size}"
        elif kind is int:
            described = "integer"
        elif kind is bool:
            described = "boolean"
        elif kind is float:
            described = "number"
        elif leaf is None:
            described = "null"
        else:
            return None
        pointer = pointers.get(key) if type(key) is str else None
        if pointer is None:
            pointer = f"/{_escape(str(key))}"
            if type(key) is str and len(pointers) < _MAX_POINTERS:
                pointers[key] = pointer
        fields[pointer] = described
    return fields


# A key's pointer in a flat object, by key (argument names recur in every call).
_POINTERS: dict[str, str] = {}
_MAX_POINTERS = 4096


def shape(value: Any, *, size: int | None = None) -> dict[str, Any]:
    """``{"fields": {pointer: "type[:size]"}, "bytes": N}``; no value is kept.

    ``bytes`` is the size of the canonical JSON of the whole document. Past
    :data:`MAX_FIELDS` leaves the listing stops and ``omittedFields`` counts the rest.
    """
    flat = _flat_fields(value)
    if flat is not None:  # a flat object of scalars (most arguments): no walk
        return {"fields": flat, "bytes": len(canonical_bytes(value)) if size is None else size}
    fields: dict[str, str] = {}
    omitted = 0
    for pointer, leaf in walk(value):
        if len(fields) >= MAX_FIELDS:
            omitted += 1
            continue
        fields[pointer] = _describe(leaf)
    total = len(canonical_bytes(value)) if size is None else size
    out: dict[str, Any] = {"fields": fields, "bytes": total}
    if omitted:
        out["omittedFields"] = omitted
    return out


def _cut(value: Any, chars: int) -> Any:
    if isinstance(value, str) and len(value) > chars:
        return value[:chars] + ELLIPSIS
    return value


def preview(redacted: Any, max_bytes: int, *, size: int | None = None) -> Any:
    """The redacted arguments if their canonical JSON fits ``max_bytes``; else a listing.

    The listing (``{"truncated": true, "maxBytes", "totalBytes", "fields": [...]}``) has one
    ``{"path", "type", "size"?, "value"}`` per leaf, strings cut to :data:`FIELD_CHARS`
    characters, so a field that says where a write goes stays readable however large its
    neighbours are.
    """
    total = len(canonical_bytes(redacted)) if size is None else size
    if total <= max_bytes:
        return redacted
    fields: list[dict[str, Any]] = []
    omitted = 0
    for pointer, leaf in walk(redacted):
        if len(fields) >= MAX_FIELDS:
            omitted += 1
            continue
        entry: dict[str, Any] = {"path": pointer, "type": json_type(leaf)}
        size = _size(leaf)
        if size is not None:
            entry["size"] = size
        if not isinstance(leaf, Mapping | list | tuple):
            entry["value"] = _cut(leaf, FIELD_CHARS)
        fields.append(entry)
    out: dict[str, Any] = {
        "truncated": True,
        "maxBytes": max_bytes,
        "totalBytes": total,
        "fields": fields,
    }
    if omitted:
        out["omittedFields"] = omitted
    return out


def _at(value: Any, pointer: str) -> tuple[bool, Any]:
    """The value at an RFC 6901 pointer, if there is one."""
    if pointer == "":
        return True, value
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, Mapping) and token in value:
            value = value[token]
        elif isinstance(value, list | tuple) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return False, None
    return True, value


def arguments_record(
    redacted: Any, audit: tuple[str, ...] = (), *, size: int | None = None
) -> dict[str, Any]:
    """What events and call rows keep of a call's (redacted) arguments: their :func:`shape`,
    plus ``audit`` — the values at the contract's ``audit`` pointers, when it lists any.
    ``size`` (here and in :func:`shape` / :func:`preview`): the canonical JSON's length when
    the caller already has it."""
    record = shape(redacted, size=size)
    kept = {}
    for pointer in audit:
        found, value = _at(redacted, pointer)
        if found:
            kept[pointer] = value
    if kept:
        record["audit"] = kept
    return record


def legacy_record(summary: Any) -> dict[str, Any] | None:
    """The record of an event written before shapes: the shape of its stored summary."""
    return None if summary is None else shape(summary)
