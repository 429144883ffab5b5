"""What ``charter.remote.app`` checks of a request before it trusts anything in it — pure
functions over its headers and body, no I/O.

In the order the app applies them:

1. :func:`charter.contracts.problem.content_coding_refused` and :func:`type_refused`
   (``/execute``, before the body is read): a body with a ``Content-Encoding`` other than
   ``identity`` (nothing decompresses it; read as JSON it would run as whatever its bytes
   say) or a ``Content-Type`` that is not JSON (or sent twice) is ``415
   UNSUPPORTED_MEDIA_TYPE``, by the rules the API server applies
   (:mod:`charter.contracts.problem`). A body with no ``Content-Type`` is read as JSON.
2. :func:`repeated_credential` (both endpoints): ``Authorization`` or an ``X-Charter-*``
   signature header sent twice is ``401``, whichever value came first — a proxy in front of
   the executor may have read the other one.
3. :func:`not_strict_json` (``/execute``, after authentication): why a body that
   :func:`charter.executors.http_protocol.loads_strict` refused is not strict JSON — a
   repeated member by its JSON Pointer, ``NaN``, a lone surrogate, nesting too deep, not
   UTF-8 — never quoting the body.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from charter.contracts.problem import json_type_refused
from charter.contracts.text import clipped, shown
from charter.executors.http_protocol import NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER

CREDENTIAL_HEADERS = ("Authorization", TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER)
"""The headers a request is authenticated by: each may be sent at most once."""

_NOT_UTF8 = "the body is not UTF-8 JSON (RFC 8259: UTF-8, without a byte order mark)"
_KINDS = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
}


def type_refused(values: Sequence[str]) -> str | None:
    """Why a body with these ``Content-Type`` header values is refused (or None: JSON, or
    no type claimed)."""
    if len(values) > 1:
        return f"the Content-Type header was sent {len(values)} times"
    return json_type_refused(values[0]) if values else None


def repeated_credential(names: Iterable[str]) -> tuple[str, int] | None:
    """The first of :data:`CREDENTIAL_HEADERS` that ``names`` (the name of every header the
    request sent) holds more than once, and how many times; or None."""
    sent = Counter(name.lower() for name in names)
    for name in CREDENTIAL_HEADERS:
        if sent[name.lower()] > 1:
            return name, sent[name.lower()]
    return None


def not_an_object(doc: Any) -> str:
    """Why a parsed body is refused for not being an object."""
    return f"the body must be a JSON object, not {_KINDS.get(type(doc), 'JSON')}"


class _Repeated(ValueError):
    pass


class _NotJson(ValueError):
    pass


class _Repeating(dict[str, Any]):
    """A decoded object that named ``member`` more than once."""

    member: str


def _pairs_marking_repeats(members: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(members)
    if len(obj) == len(members):
        return obj
    found = _Repeating(obj)
    names: set[str] = set()
    for name, _ in members:
        if name in names:
            found.member = name
            break
        names.add(name)
    return found


def _constant(name: str) -> Any:
    raise _NotJson(f"the body holds {name}, which is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotJson("the body holds a number out of range (JSON numbers are finite)")
    return value


def _repeat_path(doc: Any) -> tuple[str | int, ...] | None:
    """The path of the first repeated member of the outermost object naming one, breadth
    first (without recursion: the body nested as deep as the decoder allowed)."""
    queue: list[tuple[tuple[str | int, ...], Any]] = [((), doc)]
    for path, value in queue:
        if isinstance(value, _Repeating):
            return (*path, value.member)
        if isinstance(value, dict):
            queue.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            queue.extend(((*path, i), v) for i, v in enumerate(value))
    return None


def _pointer(path: Sequence[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def not_strict_json(body: bytes) -> str:
    """Why ``body`` is not strict JSON (called once ``loads_strict`` refused it)."""
    if not body.strip():
        return "the body is empty; send the call as a JSON object"
    if json.detect_encoding(body) != "utf-8":  # UTF-16, UTF-32, or a UTF-8 byte order mark
        return _NOT_UTF8
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return _NOT_UTF8
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_pairs_marking_repeats,
            parse_constant=_constant,
            parse_float=_float,
        )
    except _NotJson as exc:
        return str(exc)
    except json.JSONDecodeError as exc:  # its message names what and where, never the text
        return f"the body is not valid JSON ({exc.msg}: character {exc.pos})"
    except RecursionError:
        return "the body nests too deeply"
    except ValueError:  # more digits than int() takes (sys.set_int_max_str_digits)
        return "the body holds an integer with too many digits"
    path = _repeat_path(doc)
    if path is not None:
        where = clipped(_pointer(path), 200)
        return f"the member {shown(path[-1])} appears twice (at {where})"
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # an escaped \ud800 decodes to a str no answer can encode
        return "the body holds a lone surrogate (not valid Unicode)"
    except (ValueError, RecursionError):
        pass
    return "the body is not valid JSON"
