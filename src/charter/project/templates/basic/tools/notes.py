"""Notes: a tiny notebook kept in a SQLite file of its own (data/notes.db).

Every note belongs to the tenant of the principal that added it, and every function reads and
writes only the caller's tenant (``ctx.tenant``, set by Charter from the deployment file, never
by the model): another tenant's notes answer exactly like missing ones.

Each function is an ordinary Python function: call it directly in a unit test. Charter reads
the @charter.tool declarations when the project is built, and calls the functions through its
governed kernel at run time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

import charter

DATA = Path(__file__).resolve().parent.parent / "data" / "notes.db"


def _connect() -> sqlite3.Connection:
    DATA.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(DATA)
    db.row_factory = sqlite3.Row
    db.execute(
        "CREATE TABLE IF NOT EXISTS notes ("
        " id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, title TEXT NOT NULL,"
        " body TEXT NOT NULL, idempotency_key TEXT UNIQUE)"
    )
    return db


def _tenant(ctx: charter.Context) -> str:
    if not ctx.tenant:
        raise PermissionError("notes are kept per tenant: this call carries no tenant")
    return ctx.tenant


def _row(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "title": row["title"], "body": row["body"]}


@charter.tool("notes.search", permissions=["notes:read"])
def search(
    query: Annotated[str, Field(max_length=200)] = "",
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
    *,
    ctx: charter.Context,
) -> dict[str, Any]:
    """Search notes whose title or body contains the query (case-insensitive)."""
    with _connect() as db:
        rows = db.execute(
            "SELECT * FROM notes WHERE tenant = ?1 AND (title LIKE ?2 OR body LIKE ?2)"
            " ORDER BY id LIMIT ?3",
            (_tenant(ctx), f"%{query}%", limit),
        ).fetchall()
    return {"notes": [_row(r) for r in rows]}


@charter.tool("notes.get", permissions=["notes:read"])
def get(note_id: Annotated[int, Field(ge=1)], ctx: charter.Context) -> dict[str, Any]:
    """Read one note by its id."""
    with _connect() as db:
        row = db.execute(
            "SELECT * FROM notes WHERE id = ? AND tenant = ?", (note_id, _tenant(ctx))
        ).fetchone()
    return {"note": _row(row) if row else None}


@charter.tool("notes.add", effect="write", permissions=["notes:write"])
def add(
    title: Annotated[str, Field(min_length=1, max_length=200)],
    body: Annotated[str, Field(max_length=10_000)],
    ctx: charter.Context,
) -> dict[str, Any]:
    """Add a note to the notebook. Needs a human approval; runs at most once per call."""
    with _connect() as db:
        # The idempotency key makes the effect happen once even if the same call arrives twice.
        db.execute(
            "INSERT OR IGNORE INTO notes (tenant, title, body, idempotency_key)"
            " VALUES (?, ?, ?, ?)",
            (_tenant(ctx), title, body, ctx.idempotency_key),
        )
        row = db.execute(
            "SELECT * FROM notes WHERE idempotency_key = ? AND tenant = ?",
            (ctx.idempotency_key, _tenant(ctx)),
        ).fetchone()
    return {"note": _row(row)}
