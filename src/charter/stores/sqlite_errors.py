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


# Primary result codes that mean the storage itself failed (a write or fsync returned an
# error, the disk is full, the file is damaged): the store stops writing (fail-stop).
_STORAGE_FAILURES = frozenset({10, 11, 13, 26})  # IOERR, CORRUPT, FULL, NOTADB


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite reporting an I/O error, a full disk or a damaged file."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.Error)
        and isinstance(code, int)
        and code & 0xFF in (_STORAGE_FAILURES)
    )
