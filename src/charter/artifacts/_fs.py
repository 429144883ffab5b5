"""Descriptor-relative file system steps for the local store: no path is ever joined and opened.

Every component is opened relative to its parent's descriptor with ``O_NOFOLLOW`` (directories
also with ``O_DIRECTORY``), so a symlink anywhere — including one swapped in between two steps —
makes the open fail instead of being followed. Classification after a refusal (symlink or
file?) uses ``fstatat(..., AT_SYMLINK_NOFOLLOW)`` and never changes the decision.

Publication uses ``renameat2(RENAME_NOREPLACE)`` (through ctypes; Linux ≥ 3.15, glibc ≥ 2.28):
atomic, never overwrites, and the file never has two names. Where the file system or C library
lacks it (``EINVAL`` / ``ENOSYS``) it falls back to ``linkat`` + ``unlinkat``, which also never
overwrites but leaves the file briefly with two links (a concurrent read may then see
``ARTIFACT_HARDLINK`` for a moment).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Callable

from charter.artifacts import failures
from charter.errors import Failure

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
FILE_MODE = 0o644
DIR_MODE = 0o755
_RENAME_NOREPLACE = 1


def _load_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # pragma: no cover - non-glibc systems
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()
_use_renameat2 = _renameat2 is not None


def rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """Move ``src`` to ``dst`` without ever replacing ``dst`` (``FileExistsError`` if taken)."""
    global _use_renameat2
    if _use_renameat2 and _renameat2 is not None:
        if _renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(err, os.strerror(err))
        _use_renameat2 = False  # pragma: no cover - file systems without RENAME_NOREPLACE
    os.link(
        src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir, follow_symlinks=False
    )  # pragma: no cover
    os.unlink(src, dir_fd=src_dir)  # pragma: no cover


def classify(parent: int, name: str, path: str, run_id: str) -> Failure:
    """Why a directory open of ``name`` failed with ``ENOTDIR`` (after the refusal).

    ``O_DIRECTORY | O_NOFOLLOW`` answers ``ENOTDIR`` for a symlink as for a file. A name that is
    a directory again by the time we look was swapped (a symlink is what an attacker swaps in),
    so it is reported as ``ARTIFACT_SYMLINK``.
    """
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return failures.not_found(path, run_id=run_id)
    except OSError:
        return failures.not_regular(path, run_id=run_id)
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return failures.symlink(path, run_id=run_id)
    if stat.S_ISREG(st.st_mode):
        return failures.not_directory(path, run_id=run_id)
    return failures.not_regular(path, run_id=run_id)


def open_dir(parent: int, name: str, *, create: bool, path: str, run_id: str) -> tuple[int, bool]:
    """Open (creating it if asked) directory ``name`` under ``parent``; return (fd, created)."""
    created = False
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent), created
    except FileNotFoundError:
        if not create:
            raise failures.not_found(path, run_id=run_id) from None
    except OSError as exc:
        raise translate(exc, parent, name, path, run_id) from None
    try:
        os.mkdir(name, DIR_MODE, dir_fd=parent)
        created = True
    except FileExistsError:
        pass  # another writer made it first; open it (without following) like any other
    except OSError as exc:
        raise translate(exc, parent, name, path, run_id) from None
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent), created
    except OSError as exc:
        raise translate(exc, parent, name, path, run_id) from None


def translate(exc: OSError, parent: int, name: str, path: str, run_id: str) -> Failure:
    """An ``OSError`` from one descriptor-relative step, as an artifact failure."""
    if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink: no need to look again
        return failures.symlink(path, run_id=run_id)
    if exc.errno == errno.ENOTDIR:
        return classify(parent, name, path, run_id)
    if exc.errno in (errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP):  # a socket, say
        return failures.not_regular(path, run_id=run_id)
    if exc.errno == errno.ENOENT:
        return failures.not_found(path, run_id=run_id)
    if exc.errno == errno.EEXIST:
        return failures.exists(path, run_id=run_id)
    if exc.errno == errno.ENAMETOOLONG:
        return failures.store_error(
            "the file system refused the name as too long", reason="ARTIFACT_NAME_TOO_LONG"
        )
    return io_failed(exc, path, run_id)


def io_failed(exc: OSError, path: str, run_id: str) -> Failure:
    """An ``OSError`` from writing, syncing or renaming an artifact's content (the disk is
    full, or failing) as the store failure that says so; the path goes into ``details``."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return failures.store_error(
            "the file system holding the artifact store is full (or the quota of its user is"
            " used up): nothing was published; free some space and try again",
            reason="ARTIFACT_STORE_FULL",
            run_id=run_id,
            path=path,
        )
    return failures.store_error(
        f"the artifact file system failed ({errno.errorcode.get(exc.errno or 0, 'EIO')}):"
        " nothing was published; check the disk holding the artifact store",
        reason="ARTIFACT_STORE_ERROR",
        run_id=run_id,
        path=path,
    )


def open_regular(parent: int, name: str, *, path: str, run_id: str) -> tuple[int, os.stat_result]:
    """Open ``name`` for reading: a regular file with one link, never blocking, never followed."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise translate(exc, parent, name, path, run_id) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise failures.not_regular(path, run_id=run_id)
        if st.st_nlink != 1:
            raise failures.hardlink(path, run_id=run_id)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def close_all(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):  # closing a valid descriptor does not fail
            os.close(fds.pop())
