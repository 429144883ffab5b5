"""The SQLite store's files as it opened them: the database file and its write-ahead log.

A process that has the database open keeps writing through its open file descriptors even
after the files were deleted, renamed, replaced (``mv backup.db charter.db``) or emptied
(``> charter.db``) under it. SQLite does not notice in WAL mode, so every commit "succeeds"
into a file that no other process opens and that is gone when this process ends: calls
reported done and then lost, at restart, with no trace. :class:`OpenedFiles` records the
identity (device, inode) of both files once the writer has opened them, and the store checks
it before each COMMIT (two ``stat`` calls, against the commit's ``fsync``): a file that is no
longer the one opened is a storage failure, so the store stops writing (fail-stop) and every
write says which file, with nothing written.

A database this open creates (:func:`create_database`) and then fails to make because the
disk is full (``STORE_DISK_FULL``) is removed again with the ``-wal``, ``-shm`` and
``-journal`` files the attempt made (:meth:`NewDatabase.remove`): no empty or half-made file
is left to be taken as an existing database by the next open, which starts afresh. A file
that existed before the open is never removed, nor a database another process has since
replaced it with, nor one after any other failure (another process may have opened the new
file and be using it: this open may have timed out waiting for that process's lock).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

_HEADER = 100  # bytes of a SQLite database file's header: a file shorter holds no database
_COMPANIONS = ("-wal", "-shm", "-journal")


class FileReplaced(sqlite3.OperationalError):
    """A database file of the store is no longer the one it opened (a storage failure)."""


class OpenedFiles:
    """The identity of the database file and its ``-wal`` as the writer opened them."""

    def __init__(self, path: str) -> None:
        self.path = path if path == ":memory:" else os.path.abspath(path)
        self._db: tuple[int, int] | None = None
        self._wal: tuple[int, int] | None = None

    def record(self) -> None:
        """Remember both files (after the writer connection opened the database in WAL
        mode, so both exist; one missing, as with ``:memory:``, is not checked)."""
        if self.path == ":memory:":
            return
        self._db = _identity(self.path)
        self._wal = _identity(self.path + "-wal")

    def check(self) -> None:
        """Raise :class:`FileReplaced` naming the file if the database or its write-ahead
        log was deleted, replaced or emptied since :meth:`record`."""
        for label, path, recorded in (
            ("database file", self.path, self._db),
            ("write-ahead log", self.path + "-wal", self._wal),
        ):
            if recorded is None:
                continue
            try:
                found = os.stat(path)
            except FileNotFoundError:
                what = "deleted (or moved away)"
            except OSError as exc:
                what = f"unreadable ({exc.strerror})"
            else:
                if (found.st_dev, found.st_ino) != recorded:
                    what = "replaced by another file"
                elif label == "database file" and found.st_size < _HEADER:
                    what = "emptied"
                else:
                    continue
            raise FileReplaced(
                f"the {label} {path} was {what} while this process had it open, so its "
                "writes would be lost; stop the processes that use it, put the file back or "
                "restore the database from a backup"
            )


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


class NewDatabase:
    """A database file this open created, and which of its companions did not exist yet."""

    def __init__(self, path: str, identity: tuple[int, int] | None, absent: list[str]) -> None:
        self.path = path
        self._identity = identity
        self._absent = absent

    def remove(self) -> None:
        """Remove the database file and the companions made since it was created — unless
        the file is no longer the one created (another process replaced it)."""
        if _identity(self.path) != self._identity:
            return
        for name in (*self._absent, self.path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def create_database(path: str) -> NewDatabase | None:
    """Create the database file if it does not exist: the owner's only (0600; SQLite gives its
    -wal and -shm files the same mode), in a directory created 0700; an existing file keeps
    its mode and is not this open's (None)."""
    parent = Path(path).parent
    if not parent.exists():
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    absent = [path + suffix for suffix in _COMPANIONS if not os.path.lexists(path + suffix)]
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return None
    try:
        found = os.fstat(fd)
    finally:
        os.close(fd)
    return NewDatabase(path, (found.st_dev, found.st_ino), absent)
