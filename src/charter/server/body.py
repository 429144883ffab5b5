"""Request bodies: JSON objects read strictly, with the raw text of one member kept.

A call's arguments must reach the kernel's strict parser as the caller wrote them — a
duplicate key, ``NaN`` or a lone surrogate inside ``arguments`` is invalid input that the
kernel must see and record, not something a lenient JSON decoder silently resolves. So the
outer object is scanned member by member and the ``arguments`` member's exact source text is
kept. A body that is not a JSON object is ``400 BODY_MALFORMED``.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed
from typing import Any

from charter.errors import InvalidInput

_WS = " \t\n\r"
_SURROGATE = re.compile("[\ud800-\udfff]")
_DECODER = json.JSONDecoder()


def _malformed(message: str) -> InvalidInput:
    return InvalidInput(message, reason="BODY_MALFORMED")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def parse_object(raw: bytes, *, keep_raw: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Parse a JSON object body. Members named in ``keep_raw`` are returned as their exact
    source text (a ``str``); other members are decoded. Duplicate top-level keys are refused.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("the body is not UTF-8") from None
    i = _skip(text, 0)
    if i >= len(text) or text[i] != "{":
        raise _malformed("the body must be a JSON object")
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
            raise _malformed(f"the member {key!r} appears twice")
        i = _skip(text, i)
        if i >= len(text) or text[i] != ":":
            raise _malformed("expected ':' after a member name")
        i = _skip(text, i + 1)
        try:
            value, end = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):
            raise _malformed(f"the value of {key!r} is not valid JSON") from None
        out[key] = text[i:end] if key in keep_raw else value
        i = _skip(text, end)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if i < len(text) and text[i] == "}":
            return _end(text, i + 1, out)
        raise _malformed("expected ',' or '}'")


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
