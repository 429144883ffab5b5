"""Tools served by the fault executor (and copied into the test project, so digests match).

``shop.order`` counts its business effect in its own SQLite table (``FAULT_DB``): the fault
tests read that count to prove an effect happened once. Some items make it fail before any
effect: ``exit`` (``sys.exit``), ``garbled`` (an exception whose message holds a lone
surrogate), ``unprintable`` (an exception whose ``str()`` raises).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import Any

import charter


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be shown")


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["FAULT_DB"], isolation_level=None, timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS effects (idempotency_key TEXT, item TEXT)")
    return db


@charter.tool(
    "shop.lookup",
    timeout_s=2,
    result_schema={
        "type": "object",
        "properties": {"item": {"type": "string"}, "stock": {"type": "integer"}},
        "required": ["item", "stock"],
    },
)
def lookup(item: str) -> dict[str, Any]:
    """Look up an item's stock."""
    if item == "bad-shape":
        return {"item": item, "stock": "many"}  # breaks the result schema
    return {"item": item, "stock": 3}


ORDER_RESULT = {
    "type": "object",
    "properties": {"ordered": {"type": "string"}, "effects": {"type": "integer"}},
    "required": ["ordered", "effects"],
}


@charter.tool("shop.order", effect="write", timeout_s=3, result_schema=ORDER_RESULT)
def order(item: str, ctx: charter.Context) -> dict[str, Any]:
    """Order one item (a business effect, counted in the executor's own table)."""
    if item == "exit":
        sys.exit(3)  # the tool ends itself: a failed call, never the executor's process
    if item == "garbled":  # a message decoded with surrogateescape: not encodable as UTF-8
        raise ValueError("no such item: " + b"caf\xe9".decode("utf-8", "surrogateescape"))
    if item == "unprintable":
        raise _Unprintable
    with _db() as db:
        db.execute("INSERT INTO effects VALUES (?, ?)", (ctx.idempotency_key, item))
        count = db.execute("SELECT count(*) FROM effects").fetchone()[0]
    if item == "odd-result":
        return {"ordered": item, "effects": {count}}  # a set: ran, then a result not JSON
    return {"ordered": item, "effects": count}
