"""A file a person names to be read into a run (``charter artifacts put``, ``charter workflow
run --input TYPE=FILE``): a regular file, or a clear refusal naming the path and what it is.

A FIFO would block the reader until something writes to it (forever, from a shell), a
character device such as ``/dev/zero`` or ``/dev/urandom`` never ends, a directory or a
socket cannot be read as one. The path is ``stat``-ed first (nothing is opened that is not a
regular file), then opened non-blocking and without a controlling tty, and the descriptor
``fstat``-ed again: a path swapped for a FIFO or a device between the two is refused too,
never read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from charter.contracts.text import clipped, shown
from charter.errors import InvalidInput

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
REASON = "FILE_NOT_REGULAR"


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((word for test, word in kinds if test(mode)), "not a regular file")


def _refused(what: str, path: Path, mode: int) -> InvalidInput:
    return InvalidInput(
        f"{what} {shown(str(path))} is {kind_of(mode)}, not a regular file",
        reason=REASON,
        details={"path": clipped(str(path), 1024)},
    )


def open_user_file(path: Path, *, what: str = "the file") -> BinaryIO:
    """``path`` opened for reading when it is a regular file (symlinks followed); else
    ``InvalidInput`` (``FILE_NOT_REGULAR``, or ``FILE_NOT_FOUND``) naming ``what`` and the
    path. Never blocks on a FIFO, never opens a device's controlling terminal."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _refused(what, path, mode)
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise InvalidInput(
            f"{what} {shown(str(path))}: no such file",
            reason="FILE_NOT_FOUND",
            details={"path": clipped(str(path), 1024)},
        ) from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise InvalidInput(
            f"{what} {shown(str(path))} cannot be read ({why})",
            reason="FILE_UNREADABLE",
            details={"path": clipped(str(path), 1024)},
        ) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped for something else since the stat
            raise _refused(what, path, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_user_file(path: Path, *, what: str = "the file") -> bytes:
    """The whole of a regular file (see :func:`open_user_file`)."""
    with open_user_file(path, what=what) as f:
        return f.read()
