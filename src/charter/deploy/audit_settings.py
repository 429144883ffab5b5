"""The deployment file's ``audit:`` section: where the runtime's audit trail goes.

``audit.file`` — a JSON Lines file every runtime opened with this deployment (``charter
serve``, ``charter mcp``, the CLI commands, the console, ``open_runtime``) appends one record
to per governed decision (see :mod:`charter.kernel.audit`). A relative path is relative to the
deployment file's directory; the directory must exist; the file is created with mode 0600 when
missing. ``audit.fsync`` — ``always`` (the default: a record is on disk before the call
answers) or ``never``. No ``audit:`` section: no file (the ledger is still the durable record).
``docs/deploy.md`` documents both; ``docs/operations.md`` says how to rotate the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from charter.errors import ConfigError
from charter.kernel.audit import AuditSink, FsyncPolicy, JsonlAuditSink

KEYS = frozenset({"file", "fsync"})

Check = Callable[[Any, str, frozenset[str]], Mapping[str, Any]]
Fail = Callable[[str, str], ConfigError]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditSettings:
    """``audit.file`` (absolute, or ``None``: no file) and ``audit.fsync``."""

    file: Path | None = None
    fsync: FsyncPolicy = FsyncPolicy.ALWAYS

    def describe(self) -> dict[str, Any]:
        return {"file": str(self.file) if self.file else None, "fsync": self.fsync.value}


def parse_audit(value: Any, file: Path | str, mapping: Check, fail: Fail) -> AuditSettings:
    """The ``audit:`` section, checked: the file's directory exists, the file (if it does)
    is a regular file. ``file`` is the deployment file, for relative paths."""
    if value is None:
        return AuditSettings()
    section = mapping(value, "audit", KEYS)
    fsync = FsyncPolicy.ALWAYS
    if "fsync" in section:
        try:
            fsync = FsyncPolicy(section["fsync"])
        except ValueError:
            raise fail("audit.fsync", "must be always or never") from None
    target = section.get("file")
    if target is None:
        return AuditSettings(fsync=fsync)
    if not isinstance(target, str) or not target.strip() or "\0" in target:
        raise fail("audit.file", "must be a file path")
    path = Path(target)
    if not path.is_absolute():
        base = Path(file).parent if isinstance(file, Path) else Path.cwd()
        path = base / path
    path = Path(os.path.abspath(path))
    if not path.parent.is_dir():
        raise fail("audit.file", f"directory {path.parent} does not exist")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise fail("audit.file", f"cannot create a file in {path.parent}") from None
        return AuditSettings(file=path, fsync=fsync)
    except OSError as exc:
        raise fail("audit.file", f"cannot inspect {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise fail("audit.file", f"{path} is not a regular file")
    if not os.access(path, os.W_OK):
        raise fail("audit.file", f"{path} is not writable")
    return AuditSettings(file=path, fsync=fsync)


def audit_sinks(
    settings: AuditSettings,
    extra: Sequence[AuditSink] = (),
    extra_file: str | os.PathLike[str] | None = None,
    *,
    source: Path | None = None,
) -> list[AuditSink]:
    """The deployment's file sink (opened now, so a file that cannot be written is a
    ``ConfigError`` at start-up), then ``extra``, then ``extra_file`` unless it is the same
    file. Explicit sinks add to the deployment's file: code never turns the trail off."""
    sinks: list[AuditSink] = []
    if settings.file is not None:
        sink = JsonlAuditSink(settings.file, fsync=settings.fsync)
        try:
            sink.open()
        except OSError as exc:
            where = f"{source}: audit.file" if source is not None else "audit.file"
            raise ConfigError(
                f"{where}: cannot open {settings.file} for appending: {exc.strerror}"
            ) from None
        sinks.append(sink)
    sinks.extend(extra)
    if extra_file is not None:
        path = Path(os.path.abspath(extra_file))
        if path != settings.file:
            sinks.append(JsonlAuditSink(path))
    return sinks
