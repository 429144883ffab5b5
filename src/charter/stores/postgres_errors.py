"""psycopg and pool errors onto the store error family: every psycopg exception is translated
here, for the ledger store and its conversations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import psycopg.errors
from psycopg_pool import PoolTimeout

from charter.errors import CharterError, StoreConflict, StoreError

_STORAGE_FAILURES = (
    psycopg.errors.IoError,
    psycopg.errors.DiskFull,
    psycopg.errors.DataCorrupted,
    psycopg.errors.IndexCorrupted,
)


def translate_psycopg_error(exc: BaseException) -> StoreError:
    """Map a psycopg (or pool) exception onto the store error family."""
    name = type(exc).__name__
    if isinstance(exc, psycopg.errors.IntegrityError):
        return StoreConflict(f"postgres: uniqueness or integrity rule violated ({name})")
    if isinstance(exc, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return StoreError(f"postgres: {name}", reason="STORE_BUSY", retryable=True)
    if isinstance(exc, _STORAGE_FAILURES):
        # The server's storage failed (I/O error, full disk, damaged data): fail-stop.
        return StoreError(f"postgres: {name}: the server's storage failed", reason="STORE_FAILED")
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        return StoreError(f"postgres: {name}", reason="STORE_UNAVAILABLE", retryable=True)
    return StoreError(f"postgres: {name}")


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Raise any psycopg or pool error as the store error family."""
    try:
        yield
    except CharterError:
        raise
    except (psycopg.Error, PoolTimeout) as exc:
        raise translate_psycopg_error(exc) from None
