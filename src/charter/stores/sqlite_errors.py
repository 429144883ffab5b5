"""SQLite errors onto the store error family, for the ledger store and its conversations."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import TypeVar

from charter.errors import CharterError, StoreConflict, StoreError
from charter.stores.sqlite_files import FileReplaced

_OPEN_REASONS = {
    26: "STORE_NOT_A_DATABASE",
    14: "STORE_CANNOT_OPEN",
    8: "STORE_READ_ONLY",
    13: "STORE_DISK_FULL",
    10: "STORE_FAILED",
}
"""SQLITE_NOTADB, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR: what opening a
database file can meet."""
_OPEN_HINTS = {
    "STORE_DISK_FULL": "; the disk is full: free some space and try again",
    # SQLITE_IOERR_SHMSIZE: the -shm index could not grow, as on a full disk
    "STORE_FAILED": "; the disk holding it is full or failing: check its free space (df) "
    "and the system log",
}


def translate_sqlite_error(
    exc: sqlite3.Error, *, opening: str | None = None, path: str | None = None
) -> StoreError:
    """Map a ``sqlite3`` exception onto the store error family (the only place that does).
    ``opening``: the database file being opened, named in the message with a specific reason
    (not a database, cannot be opened, read-only) so the operator knows which file to fix;
    ``path``: the file an operation on an open database read (named when it is damaged)."""
    name = type(exc).__name__
    code = getattr(exc, "sqlite_errorcode", None)
    if opening is not None:
        reason = _OPEN_REASONS.get(code & 0xFF if isinstance(code, int) else -1, "STORE_ERROR")
        if "locked" in str(exc).lower():
            reason = "STORE_BUSY"
        return StoreError(
            f"sqlite: cannot open the database {opening}: {exc}{_OPEN_HINTS.get(reason, '')}",
            reason=reason,
            retryable=reason == "STORE_BUSY",
        )
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreConflict(f"sqlite: uniqueness or integrity rule violated ({name})")
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _CORRUPTION:  # met after opening
        return StoreError(f"sqlite: {_damaged(path, str(exc))}", reason="STORE_CORRUPT")
    if primary == 10:  # SQLITE_IOERR on a read: the disk failed under it
        return StoreError(
            f"sqlite: the storage failed while reading the database ({exc}); check the disk",
            reason="STORE_FAILED",
        )
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
        return StoreError("sqlite: the database is locked", reason="STORE_BUSY", retryable=True)
    return StoreError(f"sqlite: {name}: {exc}")


_CORRUPTION = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def _damaged(path: str | None, cause: str) -> str:
    file = path or "FILE"
    named = f"{path} " if path else ""
    return (
        f"the database file {named}is damaged ({cause}); stop the processes that use it, "
        f"check it with sqlite3 {file} 'PRAGMA integrity_check' and restore it from a backup "
        "(runs exported with charter runs export verify on their own)"
    )


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite finding the database file damaged (not a failing disk)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and isinstance(code, int) and code & 0xFF in _CORRUPTION


def stopped_writing(path: str, failure: str, reason: str) -> StoreError:
    """The answer to every write after fail-stop: ``STORE_CORRUPT`` naming the file and
    what to do when a write found the file damaged, else ``STORE_FAILED``."""
    if reason == "STORE_CORRUPT":
        return StoreError(
            f"the store stopped accepting writes: {_damaged(path, failure)}; nothing was written",
            reason="STORE_CORRUPT",
        )
    return StoreError(
        f"the store stopped accepting writes after a storage error ({failure}); "
        "nothing was written. Restart once the disk is healthy.",
        reason="STORE_FAILED",
    )


# Primary result codes that mean the storage itself failed (a write or fsync returned an
# error, the disk is full, the file is damaged): the store stops writing (fail-stop).
_STORAGE_FAILURES = frozenset({10, 11, 13, 26})  # IOERR, CORRUPT, FULL, NOTADB


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite reporting an I/O error, a full disk or a damaged file."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, FileReplaced) or (
        isinstance(exc, sqlite3.Error)
        and isinstance(code, int)
        and code & 0xFF in (_STORAGE_FAILURES)
    )


T = TypeVar("T")


def is_undecodable(exc: BaseException) -> bool:
    """Whether ``exc`` is ``sqlite3`` failing to decode a TEXT value that is not UTF-8 (a
    hand edit such as ``CAST(x'ff' AS TEXT)``: SQLite itself stores any bytes as TEXT)."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(
        "Could not decode to UTF-8"
    )


def _lenient(value: bytes) -> str:
    return value.decode("utf-8", "replace")


@contextlib.contextmanager
def lenient_text(conn: sqlite3.Connection) -> Iterator[None]:
    """Read TEXT that is not UTF-8 on ``conn`` with U+FFFD for each bad byte, instead of
    failing the whole read: what a hash, a MAC or a JSON parse then checks no longer matches,
    so the damage is reported as the ledger's (a hash mismatch, a row MAC, a divergence)
    rather than as a store error. Used only to re-read after :func:`is_undecodable`: a
    Python ``text_factory`` costs a call per value."""
    conn.text_factory = _lenient
    try:
        yield
    finally:
        conn.text_factory = str


def as_store_error(exc: BaseException) -> BaseException:
    """What the writer answers for ``exc`` raised by one append's transaction."""
    if isinstance(exc, sqlite3.Error):
        return translate_sqlite_error(exc)
    if isinstance(exc, CharterError):
        return exc
    return StoreError(f"sqlite writer: {type(exc).__name__}: {exc}")


def write_transaction(
    conn: sqlite3.Connection,
    fn: Callable[[sqlite3.Connection], T],
    fail_stop: Callable[[BaseException, bool], StoreError],
    before_commit: Callable[[], None] = lambda: None,
) -> T:
    """``fn`` in a ``BEGIN IMMEDIATE`` transaction of its own on ``conn``, rolled back if it
    raises. A storage failure goes to ``fail_stop`` (with whether COMMIT had been reached);
    another SQLite error is translated (:func:`translate_sqlite_error`). ``before_commit``
    may refuse the commit (the store's files checked: :mod:`charter.stores.sqlite_files`)."""
    committing = False
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            before_commit()
            committing = True
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        if is_storage_failure(exc):
            raise fail_stop(exc, committing) from None
        raise translate_sqlite_error(exc) from None
    return result
