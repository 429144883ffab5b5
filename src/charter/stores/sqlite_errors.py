"""SQLite errors onto the store error family, for the ledger store and its conversations."""

from __future__ import annotations

import sqlite3

from charter.errors import StoreConflict, StoreError


def translate_sqlite_error(exc: sqlite3.Error) -> StoreError:
    """Map a ``sqlite3`` exception onto the store error family (the only place that does)."""
    name = type(exc).__name__
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreConflict(f"sqlite: uniqueness or integrity rule violated ({name})")
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
        return StoreError("sqlite: the database is locked", reason="STORE_BUSY", retryable=True)
    return StoreError(f"sqlite: {name}: {exc}")
