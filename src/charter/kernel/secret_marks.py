"""Secret marks: recognise a call's secret argument values in an approver's note.

Raw arguments are never stored, so when an operator approves or rejects a call minutes later
its secret values (the arguments the redactor hides: the contract's ``redact`` pointers and
sensitive key names) are no longer known — yet an operator may paste one into the note
("rejected: do not use key sk-…"). So the approval request keeps a **mark** per secret value:
its length in bytes and a keyed MAC of it (``secret_marks`` in the ``approval_requested``
event and in the pending approval's row, which drops them once decided or expired; and in
the intent — the ``tool_progress`` event of stage ``started`` — and the call row, for an
operator's note when resolving an ``unknown`` call)::

    {"bytes": 24, "mac": "<key-id>:<hex>"}

The key is derived from the deployment's fingerprint key (``secrets.fingerprint_key``, never
stored beside the data) under its own label, so a mark is no fingerprint and cannot be
reversed or matched without that key.

When the note arrives, every byte window of a mark's length is MACed, in the note as typed
and in its decoded views (percent and ``\\uXXXX`` escapes, base64 runs at every alignment);
a window that matches *is* the secret, which is then scrubbed from the note in every form the
redactor knows. A note that still matches a mark after that — or whose marks were made under
another key — is replaced whole by ``[REDACTED]``: the scrub fails closed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from charter.contracts.canonical import Fingerprinter, KeyedSha256
from charter.kernel.redaction import MIN_SCRUB_LENGTH, REDACTED, Redactor

_LABEL = b"charter.secret-mark.v1"
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{6,}=*")
MAX_MARKS = 64
"""Marks kept per approval request (the longest values first); more are not kept."""


@functools.lru_cache(maxsize=8)
def _marker(fingerprinter: Fingerprinter) -> KeyedSha256:
    return KeyedSha256(hmac.new(fingerprinter.key, _LABEL, hashlib.sha256).digest())


def _raw(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def secret_marks(fingerprinter: Fingerprinter, values: Iterable[str]) -> list[dict[str, Any]]:
    """The marks of ``values`` (those of at least :data:`MIN_SCRUB_LENGTH` characters, the
    ones the redactor scrubs from free text), in a stable order."""
    keep = sorted({v for v in values if len(v) >= MIN_SCRUB_LENGTH}, key=lambda v: (-len(v), v))
    marker = _marker(fingerprinter)
    marks = [
        {"bytes": len(_raw(v)), "mac": f"{fingerprinter.key_id}:{marker.hexdigest(_raw(v))}"}
        for v in keep[:MAX_MARKS]
    ]
    return sorted(marks, key=lambda m: (-int(m["bytes"]), str(m["mac"])))


def _views(note: str) -> list[bytes]:
    """The note's bytes, and the bytes of every decoding of it a secret could hide in."""
    views = [_raw(note)]
    if "%" in note or "+" in note:
        views.append(urllib.parse.unquote_to_bytes(note))
        views.append(urllib.parse.unquote_to_bytes(note.replace("+", " ")))
    if "\\u" in note:
        views.append(_raw(_JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), note)))
    for run in _BASE64_RUN.findall(note):
        standard = run.rstrip("=").replace("-", "+").replace("_", "/")
        for start in range(4):
            part = standard[start:]
            if len(part) % 4 == 1:
                part = part[:-1]  # a lone last character carries no whole byte
            part += "=" * (-len(part) % 4)
            if len(part) < 4:
                continue
            try:
                views.append(base64.b64decode(part, validate=True))
            except (binascii.Error, ValueError):
                continue
    return views


def _found(
    note: str, marks: Sequence[Mapping[str, Any]], fingerprinter: Fingerprinter
) -> tuple[set[str], bool]:
    """The secret values the note holds (recovered from the windows that match a mark), and
    whether some mark could not be checked (made under another key, or malformed)."""
    wanted: dict[int, set[str]] = {}
    unchecked = False
    prefix = f"{fingerprinter.key_id}:"
    for mark in marks:
        size, mac = mark.get("bytes"), mark.get("mac")
        if type(size) is not int or size < 1 or not str(mac).startswith(prefix):
            unchecked = True
        else:
            wanted.setdefault(size, set()).add(str(mac)[len(prefix) :])
    if not wanted:
        return set(), unchecked
    marker = _marker(fingerprinter)
    found: set[str] = set()
    for view in _views(note):
        for size, macs in wanted.items():
            for start in range(len(view) - size + 1):
                window = view[start : start + size]
                if marker.hexdigest(window) in macs:
                    found.add(window.decode("utf-8", "surrogatepass"))
    return found, unchecked


def scrub_note(
    note: str,
    marks: Sequence[Mapping[str, Any]] | None,
    fingerprinter: Fingerprinter,
    redactor: Redactor,
) -> str:
    """``note`` redacted by ``redactor`` (the deployment's) and with the marked secret values
    scrubbed in every form; ``[REDACTED]`` whole if one is still there afterwards."""
    clean = redactor.redact_text(note)
    if not marks:
        return clean
    found, unchecked = _found(clean, marks, fingerprinter)
    if unchecked:
        return REDACTED
    if not found:
        return clean
    clean = redactor.remember(found).redact_text(clean)
    again, _ = _found(clean, marks, fingerprinter)
    return REDACTED if again else clean
