"""Request bodies: JSON objects read strictly, with the raw text of one member kept.

A call's arguments must reach the kernel's strict parser as the caller wrote them — a
duplicate key, ``NaN`` or a lone surrogate inside ``arguments`` is invalid input that the
kernel must see and record, not something a lenient JSON decoder silently resolves. So the
outer object is scanned member by member and the ``arguments`` member's exact source text is
kept. A body that is not a JSON object, or not UTF-8 without a byte order mark
(:func:`json_text`), is ``400 BODY_MALFORMED``.

Every other JSON body is decoded by the framework, which keeps the last of repeated members;
:func:`repeated_member` finds a repeat at any depth first, so such a body is refused the same
way (:class:`RepeatedMember`, with the member's JSON Pointer) instead of one of its values
silently winning (:mod:`charter.server.intake` applies it to every route).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed
from typing import Any

from charter.errors import InvalidInput

_WS = " \t\n\r"
_SURROGATE = re.compile("[\ud800-\udfff]")
_DECODER = json.JSONDecoder()


_SHOWN = 200  # characters of a member's path a problem shows (the name is the caller's)

MemberPath = tuple[str | int, ...]


_NOT_UTF8 = "the body is not UTF-8 JSON (RFC 8259: UTF-8, without a byte order mark)"


def _malformed(message: str) -> InvalidInput:
    return InvalidInput(message, reason="BODY_MALFORMED")


def shown(text: str) -> str:
    """A member name or path as a problem may carry it: a lone surrogate escaped (no answer
    can encode it), and cut short (the caller chose its length)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def pointer(path: Sequence[str | int]) -> str:
    """The RFC 6901 JSON Pointer of a member: ``("attachments", 0, "kind")`` is
    ``/attachments/0/kind``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class RepeatedMember(InvalidInput):
    """A JSON object of the body names one member twice: ``400 BODY_MALFORMED``."""

    def __init__(self, path: MemberPath) -> None:
        self.path = path
        super().__init__(
            f"the member {shown(str(path[-1]))!r} appears twice (at {shown(pointer(path))})",
            reason="BODY_MALFORMED",
        )

    def errors(self) -> list[dict[str, Any]]:
        """The problem's ``errors`` entry, located as a schema mismatch is (``loc``)."""
        loc = ["body", *(p if isinstance(p, int) else shown(p) for p in self.path)]
        return [{"loc": loc, "msg": "the member appears twice", "type": "repeated_member"}]


def json_text(raw: bytes) -> str:
    """A JSON body's text. RFC 8259 §8.1: JSON exchanged between systems is UTF-8 without a
    byte order mark; a body in UTF-16 or UTF-32 (with a BOM or without), or with a UTF-8 BOM,
    is ``400 BODY_MALFORMED`` — a lenient decoder (the standard library's, the framework's)
    would guess its encoding and take it."""
    if json.detect_encoding(raw) != "utf-8":
        raise _malformed(_NOT_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed(_NOT_UTF8) from None


_KINDS = {"n": "null", "t": "a boolean", "f": "a boolean", "[": "an array", '"': "a string"}


def not_an_object(text: str) -> str | None:
    """Why the JSON body ``text`` is refused for not being an object (``400 BODY_MALFORMED``,
    ``the body must be a JSON object, not null``), or None: it starts as an object, is empty
    (a route with an optional body judges that), or is not JSON at all (answered as such)."""
    i = _skip(text, 0)
    if i >= len(text) or text[i] == "{":
        return None
    kind = _KINDS.get(text[i], "a number" if text[i] in "-0123456789" else None)
    if kind is None:
        return None
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None  # not JSON at all
    return f"the body must be a JSON object, not {kind}"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def parse_object(raw: bytes, *, keep_raw: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Parse a JSON object body. Members named in ``keep_raw`` are returned as their exact
    source text (a ``str``); other members are decoded. A member named twice in the body or
    in any object of a decoded member is refused (:class:`RepeatedMember`).
    """
    text = json_text(raw)
    i = _skip(text, 0)
    if i >= len(text) or text[i] != "{":
        raise _malformed(not_an_object(text) or "the body must be a JSON object")
    out: dict[str, Any] = {}
    i = _skip(text, i + 1)
    if i < len(text) and text[i] == "}":
        return _end(text, i + 1, out)
    while True:
        if i >= len(text) or text[i] != '"':
            raise _malformed("expected a member name")
        try:
            key, i = scanstring(text, i + 1, True)
        except ValueError:
            raise _malformed("a member name is not a valid JSON string") from None
        if key in out:
            raise RepeatedMember((key,))
        i = _skip(text, i)
        if i >= len(text) or text[i] != ":":
            raise _malformed("expected ':' after a member name")
        i = _skip(text, i + 1)
        try:
            value, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError as exc:  # its message names what, never the text
            at = f"{exc.msg}: character {exc.pos}"
            raise _malformed(f"the value of {shown(key)!r} is not valid JSON ({at})") from None
        except (ValueError, RecursionError) as exc:
            # Valid JSON this decoder cannot hold: nested past the interpreter's recursion
            # limit, or an integer of more than 4300 digits. Kept raw, the kernel's intake
            # refuses it with its own reason (ARGS_TOO_DEEP, ARGS_INTEGER_OUT_OF_RANGE) and
            # records the call rejected, as from every other surface.
            if key not in keep_raw:
                what = "nests too deeply" if isinstance(exc, RecursionError) else "holds an "
                what += "" if isinstance(exc, RecursionError) else "integer with too many digits"
                raise _malformed(f"the value of {shown(key)!r} {what}") from None
            value, end = None, _raw_end(text, i)
        if key in keep_raw:
            value = text[i:end]
        elif isinstance(value, dict | list):  # the decoder kept the last of repeated members
            inner = repeated_member(text[i:end])
            if inner is not None:
                raise RepeatedMember((key, *inner))
        out[key] = value
        i = _skip(text, end)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if i < len(text) and text[i] == "}":
            return _end(text, i + 1, out)
        raise _malformed("expected ',' or '}'")


def _raw_end(text: str, i: int) -> int:
    """Where the JSON value at ``i`` ends, found without decoding it (iteratively, so no
    nesting is too deep): its strings are scanned, its brackets counted; its content is the
    kernel's intake's to read and refuse."""
    n = len(text)
    if i < n and text[i] not in "[{":
        if text[i] == '"':
            return _string_end(text, i)
        j = i
        while j < n and text[j] not in ",]} \t\r\n":
            j += 1
        return j
    depth = 0
    while i < n:
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            continue
        i += 1
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return i
    raise _malformed("the body ends inside a value")


def _string_end(text: str, i: int) -> int:
    try:
        return int(scanstring(text, i + 1, True)[1])
    except ValueError:
        raise _malformed("a string is not a valid JSON string") from None


def _end(text: str, i: int, out: dict[str, Any]) -> dict[str, Any]:
    if _skip(text, i) != len(text):
        raise _malformed("unexpected text after the JSON object")
    return out


def optional_str(body: dict[str, Any], name: str, *, text: bool = False) -> str | None:
    """A string member; a lone surrogate (valid JSON, but not Unicode: no store or answer
    can hold it) is refused here, naming the member, before anything is recorded — unless
    the member is ``text`` for the kernel's strict parser (``arguments_json``), which
    rejects and audits it itself."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", reason="REQUEST_INVALID")
    if value is not None and not text and _SURROGATE.search(value):
        raise InvalidInput(
            f"{name} contains a lone surrogate (not valid Unicode)", reason="REQUEST_INVALID"
        )
    return value


def required_str(body: dict[str, Any], name: str) -> str:
    value = optional_str(body, name)
    if value is None:
        raise InvalidInput(f"{name} is required", reason="REQUEST_INVALID")
    return value


def check_members(body: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown member {unknown[0]!r}", reason="REQUEST_INVALID")


class _Repeating(dict[str, Any]):
    """A decoded object that named ``member`` more than once."""

    member: str


def repeated_member(raw: str | bytes) -> MemberPath | None:
    """The path of a member some object of the JSON text ``raw`` names twice (the outermost
    such object's, its first repeated member), or None — also when ``raw`` is not JSON at
    all: the framework's own decoding answers for that."""
    repeats = False

    def pairs(members: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal repeats
        obj = dict(members)
        if len(obj) == len(members):
            return obj
        repeats = True
        found = _Repeating(obj)
        names: set[str] = set()
        for name, _ in members:
            if name in names:
                found.member = name
                break
            names.add(name)
        return found

    try:
        doc = json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    if not repeats:
        return None
    # breadth first, without recursion: the text nested as deep as the decoder allowed
    queue: list[tuple[MemberPath, Any]] = [((), doc)]
    for path, value in queue:
        if isinstance(value, _Repeating):
            return (*path, value.member)
        if isinstance(value, dict):
            queue.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            queue.extend(((*path, i), v) for i, v in enumerate(value))
    raise AssertionError("a repeated member was seen but not found")  # pragma: no cover
