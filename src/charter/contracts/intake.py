"""Strict intake of tool arguments: parse, validate against the contract, fingerprint.

Arguments reach a tool as raw JSON text (from a model, the HTTP API, MCP) or as a Python value
(library callers). Either way they must be a JSON object that survives every rule below, or
the call is rejected with :class:`InvalidInput` and a specific ``reason``; nothing is
recorded as intent for a rejected call.

=========================== ===============================================================
reason                      when
=========================== ===============================================================
ARGS_TOO_LARGE              the UTF-8 text (or canonical JSON of a value) exceeds max_bytes
ARGS_INVALID_UTF8           raw bytes are not valid UTF-8
ARGS_MALFORMED_JSON         not JSON text (message gives the position, never the text)
ARGS_DUPLICATE_KEY          an object names a key twice (details: the object's pointer)
ARGS_NON_FINITE_NUMBER      NaN, Infinity, -Infinity, or a number that overflows (1e999)
ARGS_INTEGER_OUT_OF_RANGE   an integer outside ±(2**53 - 1), which JSON peers cannot hold
ARGS_LONE_SURROGATE         a string holds an unpaired UTF-16 surrogate (escaped or raw)
ARGS_TOO_DEEP               arrays and objects nest deeper than max_depth
ARGS_NOT_OBJECT             the arguments are valid JSON but not an object
ARGS_NOT_JSON               (Python values) a key is not a string, or a value is not JSON
ARGS_SCHEMA_MISMATCH        the object breaks the contract's args_schema
=========================== ===============================================================

Integral numbers written as floats (``1.0``, ``1e3``) within ±(2**53 - 1) become ints, so the
tool sees ``1`` and ``{"a": 1}`` and ``{"a": 1.0}`` fingerprint the same.

The hot path leans on the C parser: one hook per object (duplicate keys), per number
literal (range, non-finite, integral floats) and per NaN/Infinity literal. Cheap scans of the
text (``"\\u" in text``, ``str.count`` of brackets) decide whether a Python-level walk is
needed at all: only an escape can smuggle in a lone surrogate, and only more brackets than
the depth limit can nest too deep. A rejected number is located by re-reading the text
permissively, off the hot path.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from charter.contracts.canonical import (
    Fingerprinter,
    KeyedSha256,
    canonical_bytes,
    canonical_bytes_of_plain,
)
from charter.contracts.fastinit import maker
from charter.contracts.schema import compile_schema, json_pointer
from charter.errors import InvalidInput

__all__ = [
    "INTAKE_LIMITS",
    "Accepted",
    "Intake",
    "IntakeLimits",
    "check_value",
    "fingerprint_arguments",
    "parse_arguments",
]

_SAFE_INT = 2**53 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class IntakeLimits:
    """Bounds on one call's arguments (documented in docs/contracts.md)."""

    max_bytes: int = 1024 * 1024
    """UTF-8 size of the raw text; for Python values, of their canonical JSON."""
    max_depth: int = 64
    """Nesting of arrays and objects; the arguments object itself is depth 1."""


INTAKE_LIMITS = IntakeLimits()


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    """Arguments that passed intake, and their keyed fingerprint."""

    arguments: dict[str, Any]
    fingerprint: str
    """``hmac-sha256:<key-id>:<hex>`` over the canonical JSON of ``arguments``."""
    size: int | None = None
    """The length of that canonical JSON, in bytes."""


_make_accepted = maker(Accepted)  # once per governed call (contracts/fastinit.py)


def _reject(reason: str, message: str, **details: Any) -> NoReturn:
    raise InvalidInput(message, reason=reason, details=details or None)


# ---------------------------------------------------------------------------------------
# Parsing


class _DuplicateKey(Exception):
    """Raised inside the parser; translated to ARGS_DUPLICATE_KEY with its pointer."""


class _NonFinite(Exception):
    """Raised inside the parser for NaN, Infinity, -Infinity and overflowing numbers."""


class _IntegerRange(Exception):
    """Raised inside the parser for an integer outside ±(2**53 - 1)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateKey
    return obj


# Whether the parse now running in this thread produced a float (which then needs the
# careful canonical encoder). Set and read around one synchronous decode call.
_parsing = threading.local()


def _float(text: str) -> float | int:
    value = float(text)
    if value.is_integer():
        if -_SAFE_INT <= value <= _SAFE_INT:
            return int(value)
    elif not math.isfinite(value):
        raise _NonFinite
    _parsing.float = True
    return value


def _int(text: str) -> int:
    value = int(text)
    if len(text) > 15 and not -_SAFE_INT <= value <= _SAFE_INT:
        raise _IntegerRange
    return value


def _constant(name: str) -> NoReturn:
    raise _NonFinite


_decode = json.JSONDecoder(
    object_pairs_hook=_object, parse_float=_float, parse_int=_int, parse_constant=_constant
).decode
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Pairs(list[tuple[str, Any]]):
    """An object as parsed, keys and all, for locating a duplicate key."""


def _duplicate_key(text: str) -> tuple[str, str] | None:
    """(pointer of the first object with a repeated key, that key), in document order."""
    try:
        tree = json.loads(text, object_pairs_hook=_Pairs, parse_constant=float)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, list[str | int]]] = [(tree, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for key, _ in node:
                if key in seen:
                    return json_pointer(path), key
                seen.add(key)
            stack.extend((item, [*path, key]) for key, item in reversed(node))
        elif isinstance(node, list):
            stack.extend((item, [*path, index]) for index, item in reversed(list(enumerate(node))))
    return None


def _text(raw: str | bytes, limits: IntakeLimits) -> str:
    """The raw text, checked for size and encoding."""
    if isinstance(raw, bytes | bytearray):
        if len(raw) > limits.max_bytes:
            _reject("ARGS_TOO_LARGE", f"arguments exceed {limits.max_bytes} bytes")
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            _reject(
                "ARGS_INVALID_UTF8",
                f"arguments are not valid UTF-8 (byte {exc.start})",
                position=exc.start,
            )
    if not isinstance(raw, str):
        raise TypeError(f"arguments must be JSON text (str or bytes), not {type(raw).__name__}")
    if len(raw) > limits.max_bytes:
        _reject("ARGS_TOO_LARGE", f"arguments exceed {limits.max_bytes} bytes")
    if not raw.isascii():
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError as exc:
            _reject(
                "ARGS_LONE_SURROGATE",
                f"arguments contain a lone surrogate (character {exc.start})",
                position=exc.start,
            )
        if size > limits.max_bytes:
            _reject("ARGS_TOO_LARGE", f"arguments exceed {limits.max_bytes} bytes")
    return raw


def _parse(raw: str | bytes, limits: IntakeLimits) -> tuple[dict[str, Any], bool]:
    """The arguments object, and whether it is plain (see ``canonical_bytes_of_plain``)."""
    text = _text(raw, limits)
    _parsing.float = False
    try:
        value = _decode(text)
    except _DuplicateKey:
        found = _duplicate_key(text)
        if found is None:  # pragma: no cover - the diagnostic parse agrees with the strict one
            _reject("ARGS_DUPLICATE_KEY", "an object in the arguments repeats a key")
        pointer, key = found
        _reject(
            "ARGS_DUPLICATE_KEY",
            f"the object at {pointer or '/'} repeats the key {_clip(key)!r}",
            pointer=pointer,
            key=key,
        )
    except _NonFinite:
        _locate(text, limits)
        _reject(
            "ARGS_NON_FINITE_NUMBER",
            "arguments contain NaN, Infinity or a number too large for a double",
        )
    except _IntegerRange:
        _locate(text, limits)
        _reject("ARGS_INTEGER_OUT_OF_RANGE", "arguments contain an integer outside ±(2**53 - 1)")
    except RecursionError:
        _reject("ARGS_TOO_DEEP", f"arguments nest deeper than {limits.max_depth} levels")
    except json.JSONDecodeError as exc:
        _reject(
            "ARGS_MALFORMED_JSON",
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            position=exc.pos,
        )
    except ValueError:  # int() refuses a literal of more than sys.get_int_max_str_digits()
        _reject("ARGS_INTEGER_OUT_OF_RANGE", "arguments contain an integer with too many digits")
    if type(value) is not dict:
        _reject("ARGS_NOT_OBJECT", f"arguments must be a JSON object, not {_json_kind(value)}")
    # Only an escape can smuggle in a lone surrogate (raw ones failed the encoding check),
    # and only more brackets than the limit can nest too deep: walk only then.
    escaped = "\\u" in text
    if escaped or text.count("{") + text.count("[") > limits.max_depth:
        value = _normalise(value, 1, [], limits.max_depth)
    return value, not (escaped or _parsing.float or not text.isascii())


def _locate(text: str, limits: IntakeLimits) -> None:
    """Re-read rejected text permissively and raise the pointer-bearing error for it."""
    try:
        value = json.loads(text, parse_constant=float)
    except (ValueError, RecursionError):
        return
    _normalise(value, 1, [], limits.max_depth)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def _clip(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_arguments(raw: str | bytes, *, limits: IntakeLimits = INTAKE_LIMITS) -> dict[str, Any]:
    """Strictly parse the raw JSON text of a call's arguments (see the module's reasons).

    Raises :class:`InvalidInput`; integral floats within ±(2**53 - 1) come back as ints.
    """
    return _parse(raw, limits)[0]


# ---------------------------------------------------------------------------------------
# Python values


def _normalise(value: Any, depth: int, path: list[str | int], max_depth: int) -> Any:
    """A plain-JSON copy of ``value`` (dicts, lists, str, int, finite float, bool, None),
    or InvalidInput naming the pointer of the first offending place (never its value)."""
    kind = type(value)
    if kind is str:
        if not value.isascii() and _SURROGATE.search(value):
            _reject(
                "ARGS_LONE_SURROGATE",
                f"the string at {json_pointer(path) or '/'} contains a lone surrogate",
                pointer=json_pointer(path),
            )
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        if not -_SAFE_INT <= value <= _SAFE_INT:
            _reject(
                "ARGS_INTEGER_OUT_OF_RANGE",
                f"the integer at {json_pointer(path) or '/'} is outside ±(2**53 - 1)",
                pointer=json_pointer(path),
            )
        return value
    if kind is float:
        if not math.isfinite(value):
            _reject(
                "ARGS_NON_FINITE_NUMBER",
                f"the number at {json_pointer(path) or '/'} is NaN or infinite",
                pointer=json_pointer(path),
            )
        return int(value) if value.is_integer() and abs(value) <= _SAFE_INT else value
    # ``kind is dict`` first: the ``Mapping`` ABC's check runs Python code
    is_map = kind is dict or (kind is not list and isinstance(value, Mapping))
    if is_map or kind is list or isinstance(value, list | tuple):
        if depth > max_depth:
            _reject(
                "ARGS_TOO_DEEP",
                f"arguments nest deeper than {max_depth} levels at {json_pointer(path)}",
                pointer=json_pointer(path),
            )
        if is_map:
            out: dict[str, Any] = {}
            for key, item in value.items():
                if type(key) is not str or not key.isascii():
                    if not isinstance(key, str):
                        _reject(
                            "ARGS_NOT_JSON",
                            f"an object key at {json_pointer(path) or '/'} is not a string",
                            pointer=json_pointer(path),
                        )
                    key = _normalise(str.__str__(key), depth, [*path, key], max_depth)
                # The common leaves inline (what the recursion returns for them unchanged):
                # an ASCII string, a boolean, null, an integer within range.
                kind = type(item)
                if (
                    (kind is str and item.isascii())
                    or kind is bool
                    or item is None
                    or (kind is int and -_SAFE_INT <= item <= _SAFE_INT)
                ):
                    out[key] = item
                else:
                    out[key] = _normalise(item, depth + 1, [*path, key], max_depth)
            return out
        return [
            _normalise(item, depth + 1, [*path, index], max_depth)
            for index, item in enumerate(value)
        ]
    # Subclasses of the JSON scalars (StrEnum, IntEnum, ...) become the plain scalar.
    for base in (str, int, float):
        if isinstance(value, base):
            return _normalise(base(value), depth, path, max_depth)
    _reject(
        "ARGS_NOT_JSON",
        f"the value at {json_pointer(path) or '/'} is a {kind.__name__}, which is not JSON",
        pointer=json_pointer(path),
    )


def _flat_plain(value: dict[Any, Any]) -> dict[str, Any] | None:
    """What :func:`_normalise` makes of a flat object of the common leaves — ASCII keys;
    ASCII strings, booleans, null, integers within range (its inline case) — which is
    plain (see ``canonical_bytes_of_plain``); ``None`` for anything else."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return None
        kind = type(item)
        if (
            (kind is str and item.isascii())
            or kind is bool
            or item is None
            or (kind is int and -_SAFE_INT <= item <= _SAFE_INT)
        ):
            out[key] = item
        else:
            return None
    return out


def _check_value(value: object, limits: IntakeLimits) -> tuple[dict[str, Any], bytes]:
    flat = _flat_plain(value) if type(value) is dict else None
    if flat is not None:  # the usual arguments: one pass, and no second look to encode them
        data = canonical_bytes_of_plain(flat)
        if len(data) > limits.max_bytes:
            _reject(
                "ARGS_TOO_LARGE", f"arguments exceed {limits.max_bytes} bytes of canonical JSON"
            )
        return flat, data
    if type(value) is not dict and not isinstance(value, Mapping):
        _reject("ARGS_NOT_OBJECT", f"arguments must be an object, not a {type(value).__name__}")
    # a dict is copied by _normalise itself; another mapping is read into one first
    arguments = _normalise(value if type(value) is dict else dict(value), 1, [], limits.max_depth)
    data = canonical_bytes(arguments)
    if len(data) > limits.max_bytes:
        _reject("ARGS_TOO_LARGE", f"arguments exceed {limits.max_bytes} bytes of canonical JSON")
    return arguments, data


def check_value(value: object, *, limits: IntakeLimits = INTAKE_LIMITS) -> dict[str, Any]:
    """Apply the intake rules to an already-parsed Python value (library callers).

    Returns a plain-JSON copy (tuples become lists, ``StrEnum`` members plain strings,
    integral floats ints); raises :class:`InvalidInput` with the same reasons as
    :func:`parse_arguments`, plus ``ARGS_NOT_JSON`` for non-string keys and non-JSON values.
    """
    return _check_value(value, limits)[0]


def fingerprint_arguments(
    raw: str | bytes | Mapping[str, Any],
    fingerprinter: Fingerprinter,
    *,
    limits: IntakeLimits = INTAKE_LIMITS,
) -> str:
    """The fingerprint :meth:`Intake.accept` would give these arguments, without a schema.

    For matching a resubmitted call against a recorded one when the contract is not at hand
    (an expired context, a context of another Build). Raises :class:`InvalidInput` when the
    arguments could never have been accepted.
    """
    if isinstance(raw, str | bytes):
        arguments, plain = _parse(raw, limits)
        data = canonical_bytes_of_plain(arguments) if plain else canonical_bytes(arguments)
    else:
        _, data = _check_value(raw, limits)
    mac = hmac.new(fingerprinter.key, data, hashlib.sha256)
    return f"hmac-sha256:{fingerprinter.key_id}:{mac.hexdigest()}"


# ---------------------------------------------------------------------------------------
# The whole intake


class Intake:
    """One contract's argument intake: its schema compiled once, then parse → validate →
    fingerprint per call. Thread-safe; holds no per-call state."""

    __slots__ = ("_is_valid", "_keyed", "_limits", "_prefix", "_schema")

    def __init__(
        self,
        args_schema: Mapping[str, Any],
        fingerprinter: Fingerprinter,
        *,
        limits: IntakeLimits = INTAKE_LIMITS,
    ) -> None:
        self._schema = compile_schema(args_schema, where="args_schema", require_object=True)
        self._is_valid = self._schema.is_valid
        # The key's two hash states; copying them per call skips the key schedule.
        self._keyed = KeyedSha256(fingerprinter.key)
        self._prefix = f"hmac-sha256:{fingerprinter.key_id}:"
        self._limits = limits

    def accept(self, raw: str | bytes) -> Accepted:
        """Parse raw JSON text strictly, validate it, fingerprint it."""
        arguments, plain = _parse(raw, self._limits)
        if not self._is_valid(arguments):
            self._mismatch(arguments)
        data = canonical_bytes_of_plain(arguments) if plain else canonical_bytes(arguments)
        return _make_accepted(
            arguments=arguments, fingerprint=self._fingerprint(data), size=len(data)
        )

    def accept_value(self, value: object) -> Accepted:
        """The same for a Python value: :func:`check_value`, validate, fingerprint."""
        arguments, data = _check_value(value, self._limits)
        if not self._is_valid(arguments):
            self._mismatch(arguments)
        return _make_accepted(
            arguments=arguments, fingerprint=self._fingerprint(data), size=len(data)
        )

    def _fingerprint(self, data: bytes) -> str:
        # Fingerprinter.fingerprint(arguments) without re-encoding: same key, same format.
        return self._prefix + self._keyed.hexdigest(data)

    def _mismatch(self, arguments: dict[str, Any]) -> NoReturn:
        violation = self._schema.first_error(arguments)
        if violation is None:  # pragma: no cover - is_valid and iter_errors agree
            _reject("ARGS_SCHEMA_MISMATCH", "arguments do not match the schema")
        where = f"argument {violation.pointer}" if violation.pointer else "arguments"
        _reject(
            "ARGS_SCHEMA_MISMATCH",
            f"{where} {violation.message} (keyword {violation.keyword!r})",
            pointer=violation.pointer,
            keyword=violation.keyword,
            schema_pointer=violation.schema_pointer,
        )
