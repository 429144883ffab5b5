"""RFC 8785 canonical JSON, content digests and keyed argument fingerprints.

``canonical_bytes`` is the one serialization used for everything that is hashed: contract and
Build digests, ledger events, argument fingerprints. The reference implementation is the
``rfc8785`` package. For the common case — strings, booleans, ``None``, integers within the
IEEE-754 safe range, non-integral floats whose magnitude is at least ``1e-4`` (their ``repr``
has no exponent and is exactly the ECMAScript form RFC 8785 prescribes), lists and dicts whose
keys are in the Basic Multilingual Plane — orjson with sorted keys (and the standard library's C
encoder, which it replaced on this path) produces exactly the same bytes (property tests in
``tests/contracts`` hold them against each other and against ``rfc8785``), and is many times
faster; every other value goes through ``rfc8785``.

Integral floats are canonicalized like the integers they equal (``1.0`` → ``1``), as RFC 8785
requires, so ``{"a": 1}`` and ``{"a": 1.0}`` hash the same.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import json.encoder
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
import rfc8785

from charter.errors import ConfigError, InvalidInput

_SAFE_INT = 2**53 - 1
# Non-integral floats in [1e-4, 1e16) print without an exponent both in Python's repr and in
# ECMAScript's Number::toString, with the same shortest round-trip digits. (Every non-integral
# float is below 2**52, so the upper bound only keeps infinity out.)
_PLAIN_FLOAT_MIN = 1e-4
_PLAIN_FLOAT_MAX = 1e16
_encoder = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
)
# CPython's C encoder, called directly (``JSONEncoder.encode`` rebuilds it on every call).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encode: Any = (
    _c_make_encoder(
        None,  # markers: values reaching the fast path are trees (checked by _simple)
        _encoder.default,
        json.encoder.encode_basestring,  # the C escaper when the C encoder exists
        None,  # indent
        ":",
        ",",
        True,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
    if _c_make_encoder is not None
    else None
)
_orjson_dumps = orjson.dumps
_SORTED = orjson.OPT_SORT_KEYS


def _encode_std(value: Any) -> str:
    if _c_encode is None:  # pragma: no cover - interpreters without the C accelerator
        return _encoder.encode(value)
    return "".join(_c_encode(value, 0))


def _encode_fast(value: Any) -> bytes:
    """The canonical bytes of a value :func:`_simple` accepted.

    On that domain orjson with sorted keys writes exactly the standard library's bytes (keys in
    the Basic Multilingual Plane sort the same by UTF-8 bytes, code points and UTF-16 units;
    floats in ``[1e-4, 1e16)`` print as the shortest round-trip digits without an exponent;
    the same escapes), several times faster. It refuses two things the standard encoder
    handles: nesting beyond 254 levels (encoded here by the standard library instead) and lone
    surrogates (for which the standard encoder's text then fails to encode as UTF-8, as before).
    """
    try:
        return _orjson_dumps(value, option=_SORTED)
    except TypeError:  # orjson.JSONEncodeError
        return _encode_std(value).encode("utf-8")


_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _simple(value: Any) -> bool:
    """True when the fast encoder gives RFC 8785 bytes for ``value``.

    Strings, booleans, ``None`` and integers are checked inline in the container loops (they are
    most of the leaves), which saves a recursive call per leaf.
    """
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                return False
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if -_SAFE_INT <= item <= _SAFE_INT:
                    continue
                return False
            if not _simple(item):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if -_SAFE_INT <= item <= _SAFE_INT:
                    continue
                return False
            if not _simple(item):
                return False
        return True
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    if kind is float:
        return _PLAIN_FLOAT_MIN <= abs(value) < _PLAIN_FLOAT_MAX and not value.is_integer()
    return False


def _normalize(value: Any) -> Any:
    """Turn integral floats into ints and tuples into lists, recursively (slow path only)."""
    kind = type(value)
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidInput(
                "NaN and Infinity cannot be canonicalized", reason="ARGS_NON_FINITE_NUMBER"
            )
        if value.is_integer() and abs(value) <= _SAFE_INT:
            return int(value)
        return value
    if kind is dict:
        return {k: _normalize(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_normalize(v) for v in value]
    return value


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 encoding of a JSON-compatible value."""
    try:
        if _simple(value):
            return _encode_fast(value)
        return bytes(rfc8785.dumps(_normalize(value)))
    except UnicodeEncodeError:
        raise _lone_surrogate() from None
    except rfc8785.CanonicalizationError as exc:
        raise domain_error(value, exc) from None


def domain_error(value: Any, exc: Exception) -> InvalidInput:
    """``CANONICALIZATION_FAILED`` for ``value``, saying what and where (a JSON pointer)."""
    where = _out_of_domain(value, "")
    what = (
        f"an integer beyond ±{_SAFE_INT} (JSON numbers keep no more exactly)"
        if isinstance(exc, rfc8785.IntegerDomainError)
        else "a number that is not finite"
        if isinstance(exc, rfc8785.FloatDomainError)
        else "a value that is not JSON"
    )
    return InvalidInput(
        f"value cannot be canonicalized as JSON: {what}" + (f" at {where}" if where else ""),
        reason="CANONICALIZATION_FAILED",
        details={"field": where} if where else None,
    )


def _out_of_domain(value: Any, path: str) -> str | None:
    """The JSON pointer of the first number canonical JSON cannot hold (an integer beyond
    ±2**53-1, a float that is not finite), or None."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, bool):
            continue
        if isinstance(node, int) and abs(node) > _SAFE_INT:
            return where or "/"
        if isinstance(node, float) and (node != node or node in (float("inf"), float("-inf"))):
            return where or "/"
        if isinstance(node, dict):
            items = [(v, f"{where}/{_escape(str(k))}") for k, v in node.items()]
            stack.extend(reversed(items))
        elif isinstance(node, list | tuple):
            stack.extend(reversed([(v, f"{where}/{i}") for i, v in enumerate(node)]))
    return None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _simple_noting(value: dict[Any, Any], proven: dict[int, Any]) -> bool:
    """:func:`_simple` of a dict whose dict and list values are looked up in ``proven`` first.

    A value ``proven`` holds (the very object: its id maps to it) was proven simple earlier
    and is not walked again; each one proven here is noted there. ``proven`` keeps what it
    notes alive, so an id in it is never another object's. Like :func:`canonical_bytes`,
    this relies on a value not being changed while it is encoded: ``proven`` lasts no
    longer than the work its owner does with values handed to it (one group commit).
    """
    for key, item in value.items():
        if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
            return False
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -_SAFE_INT <= item <= _SAFE_INT:
                continue
            return False
        if kind is dict or kind is list:
            if proven.get(id(item)) is item:
                continue
            if not _simple(item):
                return False
            proven[id(item)] = item
            continue
        if not _simple(item):
            return False
    return True


def canonical_bytes_noting(value: Any, proven: dict[int, Any]) -> bytes:
    """``canonical_bytes(value)``, sparing the walk of the nested values already proven.

    A group commit encodes an event's payload and then the projection rows its handler
    built, which hold the payload's own nested objects (a call's argument shape, its
    receipt): the payload's walk notes them in ``proven`` (see :func:`_simple_noting`) and
    the row's walk skips them. Anything not proven simple goes the general way.
    """
    if type(value) is dict and _simple_noting(value, proven):
        try:
            return _encode_fast(value)
        except UnicodeEncodeError:
            raise _lone_surrogate() from None
    return canonical_bytes(value)


def _lone_surrogate() -> InvalidInput:
    return InvalidInput("a string contains a lone surrogate", reason="ARGS_LONE_SURROGATE")


def canonical_bytes_of_plain(value: Any) -> bytes:
    """``canonical_bytes`` for a value its caller has already proven plain, skipping the check.

    Plain means: a tree (no cycles) of dicts with ASCII string keys, lists, ASCII strings,
    booleans, ``None`` and integers within ±(2**53 - 1), and no floats. The strict argument
    intake proves this from the text it parsed (ASCII, no ``\\u`` escape, no float literal,
    integers range-checked by the parser); anything else must use :func:`canonical_bytes`,
    or the bytes may not be RFC 8785.
    """
    return _encode_fast(value)


def canonical_text(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def sha256_digest(value: Any) -> str:
    """``sha256:<hex>`` over the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class KeyedSha256:
    """HMAC-SHA256 (RFC 2104) under one key, from the two hash states the key leaves: the
    inner and outer padded keys absorbed once, copied per message. The same digests as
    ``hmac.new(key, msg, hashlib.sha256)``, whose copies and finalisation cost about half
    as much again (OpenSSL's HMAC context on top of the two digests)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _SHA256_BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_SHA256_BLOCK, b"\0")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def hexdigest(self, message: bytes) -> str:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()


_SHA256_BLOCK = 64
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


@dataclass(frozen=True, slots=True)
class Fingerprinter:
    """Keyed fingerprints of JSON values: ``hmac-sha256:<key-id>:<hex>``.

    The key is a retention secret supplied at run time (deployment configuration); it is never
    stored beside the data, so a fingerprint cannot be reversed by guessing arguments unless
    the key is known. Rotating the key changes every fingerprint; the key id says which key
    made one.
    """

    key_id: str
    key: bytes = field(repr=False)
    # The key's two hash states (KeyedSha256): copying them skips the key schedule per call.
    _keyed: KeyedSha256 = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _KEY_ID.match(self.key_id):
            raise ConfigError(f"fingerprint key id {self.key_id!r} must match {_KEY_ID.pattern}")
        if len(self.key) < 16:
            raise ConfigError("a fingerprint key must be at least 16 bytes long")
        object.__setattr__(self, "_keyed", KeyedSha256(self.key))

    def fingerprint(self, value: Any) -> str:
        return f"hmac-sha256:{self.key_id}:{self._keyed.hexdigest(canonical_bytes(value))}"

    def matches(self, value: Any, fingerprint: str) -> bool:
        offered = fingerprint.encode("utf-8", "surrogatepass")  # any text: not only ASCII
        return hmac.compare_digest(self.fingerprint(value).encode(), offered)
