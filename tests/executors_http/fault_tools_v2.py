"""``shop.order`` after a contract change: one optional parameter added, same version.

Served by the scripted executor in mode ``v2`` and copied into the test project to make the
new Build, so both sides agree on the new digest. Self-contained (it is copied as a file).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import charter

ORDER_RESULT = {
    "type": "object",
    "properties": {"ordered": {"type": "string"}, "effects": {"type": "integer"}},
    "required": ["ordered", "effects"],
}


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
    return {"item": item, "stock": 3}


@charter.tool("shop.order", effect="write", timeout_s=3, result_schema=ORDER_RESULT)
def order(item: str, ctx: charter.Context, note: str = "") -> dict[str, Any]:
    """Order one item (a business effect, counted in the executor's own table)."""
    db = sqlite3.connect(os.environ["FAULT_DB"], isolation_level=None, timeout=30)
    try:
        db.execute("CREATE TABLE IF NOT EXISTS effects (idempotency_key TEXT, item TEXT)")
        db.execute("INSERT INTO effects VALUES (?, ?)", (ctx.idempotency_key, item))
        count = db.execute("SELECT count(*) FROM effects").fetchone()[0]
    finally:
        db.close()
    return {"ordered": item, "effects": count}
