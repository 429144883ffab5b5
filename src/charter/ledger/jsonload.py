"""Parse stored ledger bytes: orjson where it gives what ``json.loads`` gives, else json.

Verification and replay parse every event of a run, and the standard library's parser is most
of their cost. orjson is several times faster but not identical: it rejects what ``json.loads``
accepts (``NaN``, lone surrogates, numbers that overflow a double) and turns an integer beyond
64 bits into a float. :func:`loads` therefore takes orjson's value only when serializing it
again gives back exactly the bytes that were parsed — then every number, string and key is the
one ``json.loads`` would produce — and otherwise parses with ``json.loads``. Bytes Charter
wrote (canonical JSON) take the fast path; anything else is parsed as before.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_orjson_loads = orjson.loads
_orjson_dumps = orjson.dumps
_DecodeError = orjson.JSONDecodeError


SLOW: Any = object()
"""What :func:`fast_loads` returns for bytes whose value only ``json.loads`` gives."""


def fast_loads(data: bytes) -> Any:
    """orjson's value of ``data`` when it is exactly ``json.loads``'s, else :data:`SLOW`.

    Such a value holds only finite floats: orjson refuses ``NaN``, ``Infinity`` and numbers
    that overflow a double.
    """
    try:
        value = _orjson_loads(data)
    except _DecodeError:
        return SLOW
    try:
        if _orjson_dumps(value) == data:
            return value
    except TypeError:  # orjson.JSONEncodeError: e.g. a float it parsed as infinity
        pass
    return SLOW


def loads(data: bytes) -> Any:
    """``json.loads(data)``, faster for canonical JSON; raises ``ValueError`` as it does."""
    value = fast_loads(data)
    return json.loads(data) if value is SLOW else value
