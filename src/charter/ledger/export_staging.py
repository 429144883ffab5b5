"""Half-written exports: a record for each export in progress, and a sweep of dead writers'.

An export (:func:`charter.ledger.export.export_run`) builds its directory beside the target,
in a staging directory ``.<target name>.<random>``, and renames it into place when it is
complete. A writer killed meanwhile (SIGKILL included) leaves the staging directory behind,
somewhere nothing else knows about. So an export made for a project records it first:
:func:`begin` writes ``.charter/staging/exports/<id>.json`` (atomically: a temporary name,
then a rename) holding the staging path, its device and inode, the target, and the writer's
host, pid and process start token; :func:`end` removes the record once the staging
directory has been renamed into place or removed.

Opening a runtime runs :func:`sweep_exports`: a record whose writer is dead (same host, and
no process with that pid and start token) has its staging directory removed — only if it
still is what the record says: the recorded path, named as a staging directory of the
recorded target (never the target itself, so never a finished export), a directory (not a
symlink) with the recorded device and inode, reached from ``/`` one component at a time
without following symlinks, and removed with the fd-based ``rmtree`` that never follows
one. Each removal is logged (``charter.ledger.export_staging``, warning); the record is then
deleted. A record of a living writer, or of another host, is kept. The window: a writer
killed between creating its staging directory and writing its record leaves an unrecorded
directory (remove it by hand).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("charter.ledger.export_staging")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RECORD = re.compile(r"^[0-9a-f]{16}\.json$")


def records_dir(project: Path) -> Path:
    """Where a project's export records live."""
    return project / ".charter" / "staging" / "exports"


def process_start(pid: int) -> str | None:
    """The start token of process ``pid`` (its start time from /proc), or None if there is
    no such process (or no /proc to ask)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(record: dict[str, Any]) -> bool:
    if record.get("host") != socket.gethostname():
        return True  # another host's writer: this host cannot tell
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    if not os.path.isdir("/proc/self"):  # no /proc: the pid alone decides
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    start = process_start(pid)
    return start is not None and start == record.get("start")


def begin(records: Path, staging: Path, target: Path) -> Path:
    """Record ``staging`` (just created for ``target``) before anything is written into it."""
    records.mkdir(parents=True, exist_ok=True)
    parent = staging.parent.resolve()
    staging, target = parent / staging.name, parent / target.name
    st = os.stat(staging, follow_symlinks=False)
    doc = {
        "staging": str(staging),
        "target": str(target),
        "dev": st.st_dev,
        "ino": st.st_ino,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start": process_start(os.getpid()),
        "at": time.time(),
    }
    path = records / f"{secrets.token_hex(8)}.json"
    tmp = records / f".{path.name}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def end(record: Path) -> None:
    """The export is in place or cleaned up: forget its record."""
    with contextlib.suppress(FileNotFoundError):
        record.unlink()


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovedExport:
    """A half-written export the sweep removed."""

    staging: str
    target: str
    pid: int
    bytes: int


def _open_dir(path: Path) -> int:
    """``path`` (absolute) opened one component at a time, never following a symlink."""
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in path.parts[1:]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _size(fd: int) -> int:
    total = 0
    for entry in os.scandir(fd):
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
            elif stat.S_ISDIR(st.st_mode):
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                try:
                    total += _size(sub)
                finally:
                    os.close(sub)
    return total


def _staging_of(record: dict[str, Any]) -> tuple[Path, str] | None:
    """The recorded staging directory's parent and name, if the record is well formed and
    names a staging directory of its target (never the target itself)."""
    staging, target = record.get("staging"), record.get("target")
    if not isinstance(staging, str) or not isinstance(target, str):
        return None
    s, t = Path(staging), Path(target)
    if not s.is_absolute() or s.parent != t.parent or s == t or ".." in s.parts:
        return None
    if not re.fullmatch(re.escape(f".{t.name}.") + r"[A-Za-z0-9_]+", s.name):
        return None
    if not isinstance(record.get("dev"), int) or not isinstance(record.get("ino"), int):
        return None
    return s.parent, s.name


def _remove(record: dict[str, Any]) -> RemovedExport | None:
    found = _staging_of(record)
    if found is None:
        logger.warning("an export record names no staging directory: left alone")
        return None
    parent, name = found
    try:
        parent_fd = _open_dir(parent)
    except OSError:
        return None  # gone, or reached through a symlink: nothing removed
    try:
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # renamed into place or removed before the record was
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != (
            record["dev"],
            record["ino"],
        ):
            logger.warning(
                "%s is not the staging directory its export record names: left alone",
                parent / name,
            )
            return None
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        try:
            size = _size(fd)
        finally:
            os.close(fd)
        shutil.rmtree(name, dir_fd=parent_fd)  # fd-based: never follows symlinks
    finally:
        os.close(parent_fd)
    return RemovedExport(
        staging=str(parent / name), target=str(record["target"]), pid=record["pid"], bytes=size
    )


def sweep_exports(records: Path) -> list[RemovedExport]:
    """Remove the staging directories of exports whose writers died; log each; drop their
    records. Records of living writers are kept."""
    try:
        names = sorted(os.listdir(records))
    except OSError:
        return []  # no export was ever recorded
    removed: list[RemovedExport] = []
    for name in names:
        if not _RECORD.fullmatch(name):
            continue
        path = records / name
        try:
            with open(path, "rb") as fh:
                record = json.loads(fh.read())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or _alive(record):
            continue
        try:
            done = _remove(record)
        except OSError as exc:
            logger.warning("could not remove a half-written export: %s", type(exc).__name__)
            continue
        if done is not None:
            removed.append(done)
            logger.warning(
                "removed half-written export %s (%d bytes, for %s), left by a writer that "
                "died (pid %d)",
                done.staging,
                done.bytes,
                done.target,
                done.pid,
            )
        end(path)
    return removed
