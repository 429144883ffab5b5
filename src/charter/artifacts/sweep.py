"""Sweep a local artifact store's staging areas of what dead writers left behind.

Every entry in a run's ``.staging/`` belongs to a writer that holds an exclusive ``flock`` on
it while it works: a temporary file (``w-…``) from the file's creation to its publication
or removal, a subprocess staging area (``a-<call>.<n>``, renamed ``x-…`` while accepted)
from its creation to its acceptance or discard. The kernel releases such a lock only by
finishing; the operating system releases it when the process dies (SIGKILL included). So an
entry whose lock can be taken has no living writer: :func:`sweep_staging` removes it. A
registered artifact never lives under ``.staging/`` (publication renames it out), so the
sweep never touches one. The only window is between a writer's ``O_EXCL`` create and its
``flock`` (two system calls back to back).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("charter.artifacts.sweep")
STAGING = ".staging"
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Leftover:
    """One staging entry a dead writer left, removed by the sweep."""

    run_id: str
    name: str
    bytes: int


def lock_held(fd: int) -> None:
    """Take the writer's lock on a staging entry it just created (never blocks: it is new)."""
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _size(fd: int, is_dir: bool) -> int:
    if not is_dir:
        return os.fstat(fd).st_size
    total = 0
    for entry in os.scandir(fd):
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
            elif stat.S_ISDIR(st.st_mode):
                sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
                try:
                    total += _size(sub, True)
                finally:
                    os.close(sub)
    return total


def _sweep_run(root_fd: int, run_id: str) -> list[Leftover]:
    removed: list[Leftover] = []
    try:
        run = os.open(run_id, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=root_fd)
    except OSError:
        return removed
    try:
        try:
            staging = os.open(STAGING, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=run)
        except OSError:
            return removed
        try:
            for name in sorted(os.listdir(staging)):
                found = _sweep_entry(staging, run_id, name)
                if found is not None:
                    removed.append(found)
        finally:
            os.close(staging)
    finally:
        os.close(run)
    return removed


def _sweep_entry(staging: int, run_id: str, name: str) -> Leftover | None:
    try:
        st = os.stat(name, dir_fd=staging, follow_symlinks=False)
    except OSError:
        return None
    is_dir = stat.S_ISDIR(st.st_mode)
    if not (is_dir or stat.S_ISREG(st.st_mode)):
        return None  # nothing a Charter writer makes: leave it for an operator
    flags = os.O_RDONLY | _NOFOLLOW | (os.O_DIRECTORY if is_dir else 0)
    try:
        fd = os.open(name, flags, dir_fd=staging)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a living writer holds it
        size = _size(fd, is_dir)
        try:
            if is_dir:
                shutil.rmtree(name, dir_fd=staging)  # fd-based: never follows symlinks
            else:
                os.unlink(name, dir_fd=staging)
        except FileNotFoundError:
            return None  # its writer finished meanwhile
        return Leftover(run_id=run_id, name=name, bytes=size)
    finally:
        os.close(fd)


def sweep_staging(root: Path) -> list[Leftover]:
    """Remove the staging leftovers of dead writers under every run of ``root``; log each."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []  # no artifacts yet
    removed: list[Leftover] = []
    try:
        for run_id in sorted(os.listdir(root_fd)):
            removed.extend(_sweep_run(root_fd, run_id))
    finally:
        os.close(root_fd)
    for item in removed:
        logger.warning(
            "removed %s/%s/%s (%d bytes), left by a writer that died",
            item.run_id,
            STAGING,
            item.name,
            item.bytes,
        )
    return removed
