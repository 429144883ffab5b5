"""Audit: one record per governed decision — success, failure, denial and everything between.

The kernel writes an :class:`AuditRecord` for every call outcome to an :class:`AuditSink`. The
default, durable sink is the ledger (the kernel's own events); :class:`JsonlAuditSink` appends
to a file for log shippers; :class:`FanoutAuditSink` writes to several. Records are built by
the kernel from redacted data only: ``details`` must already be redacted, and no sink ever
receives raw arguments (only their fingerprint).

**A failing sink never fails a call.** :class:`FanoutAuditSink` catches every sink error, logs
it (redacted, through :mod:`logging` under ``charter.audit``), counts it in
:attr:`FanoutAuditSink.failures` and keeps the last error per sink in
:attr:`FanoutAuditSink.last_errors` so health checks can report it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from charter.errors import ConfigError
from charter.kernel.redaction import Redactor

logger = logging.getLogger("charter.audit")

AUDIT_SCHEMA_VERSION = 1


class AuditOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DENIED = "denied"
    REJECTED = "rejected"  # invalid input: nothing recorded as intent
    PENDING_APPROVAL = "pending_approval"
    UNKNOWN = "unknown"
    CONFLICT = "conflict"
    CACHED = "cached"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"
    APPROVED = "approved"  # an approval decision
    APPROVAL_REJECTED = "approval_rejected"
    RESOLVED = "resolved"  # an operator resolved an unknown call
    RUN_REFUSED = "run_refused"  # a run's ledger failed verification (or was quarantined)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One audited decision. Every string here is safe to show an operator."""

    at: datetime
    actor: str | None  # the principal's name
    tenant: str | None
    tool: str | None
    tool_version: str | None
    call_id: str | None
    context_id: str | None
    run_id: str | None
    outcome: AuditOutcome | str
    code: str | None = None  # one of the seven error codes, when not succeeded
    reason: str | None = None  # the fine-grained upper-case reason
    fingerprint: str | None = None  # of the arguments; never the arguments
    duration_ms: float | None = None
    mode: str = "enforce"
    details: Mapping[str, Any] = field(default_factory=dict)  # already redacted

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": AUDIT_SCHEMA_VERSION,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "tenant": self.tenant,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "call_id": self.call_id,
            "context_id": self.context_id,
            "run_id": self.run_id,
            "outcome": str(self.outcome),
            "code": self.code,
            "reason": self.reason,
            "fingerprint": self.fingerprint,
            "duration_ms": self.duration_ms,
            "mode": self.mode,
            "details": dict(self.details),
        }


class AuditSink(Protocol):
    async def record(self, record: AuditRecord) -> None: ...


class FsyncPolicy(StrEnum):
    """When :class:`JsonlAuditSink` forces its lines to disk."""

    ALWAYS = "always"  # fsync after every line: a returned record survives a power cut
    NEVER = "never"  # leave it to the OS: survives a process crash, not a power cut


class JsonlAuditSink:
    """Appends one JSON line per record to a file (created with mode 0600).

    Each line is one ``write`` to an ``O_APPEND`` descriptor, so on a local filesystem
    concurrent writers (threads or processes) never interleave within a line; a short write
    (a full disk) is completed by a second ``write`` and may then be split by another
    process's line, and network filesystems (NFS) do not keep ``O_APPEND`` atomic at all —
    give each process its own file there. With :attr:`FsyncPolicy.ALWAYS` (the default)
    :meth:`record` returns only after ``fsync``; with ``NEVER`` a record reaches the OS page
    cache and survives a crash of this process but not of the machine. The ``details`` are
    passed through ``redactor`` once more (defence in depth).

    Rotation: before each line the sink compares the path with the file it holds open; when
    the file was renamed or removed (``logrotate`` without ``copytruncate``), it closes it and
    creates a new file at the path, so no record goes to the rotated file after that check.
    """

    def __init__(
        self,
        path: Path,
        *,
        fsync: FsyncPolicy | str = FsyncPolicy.ALWAYS,
        redactor: Redactor | None = None,
    ) -> None:
        self.path = Path(path)
        try:
            self.fsync = FsyncPolicy(fsync)
        except ValueError:
            raise ConfigError("audit fsync policy must be `always` or `never`") from None
        self._redactor = redactor or Redactor()
        self._lock = threading.Lock()
        self._fd: int | None = None

    def open(self) -> None:
        """Open (create) the file now rather than at the first record; ``OSError`` if not."""
        with self._lock:
            self._open()

    def _open(self) -> int:
        if self._fd is not None and not self._same_file(self._fd):
            os.close(self._fd)  # rotated away: the next line goes to a new file at the path
            self._fd = None
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            self._fd = os.open(self.path, flags, 0o600)
        return self._fd

    def _same_file(self, fd: int) -> bool:
        try:
            named = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def _write(self, line: bytes) -> None:
        with self._lock:
            fd = self._open()
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync is FsyncPolicy.ALWAYS:
                os.fsync(fd)

    async def record(self, record: AuditRecord) -> None:
        data = record.to_dict()
        data["details"] = self._redactor.redact(data["details"])
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        await anyio.to_thread.run_sync(self._write, line.encode("utf-8", "backslashreplace"))

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class FanoutAuditSink:
    """Writes each record to every sink, concurrently; a failing sink never fails the call."""

    def __init__(
        self,
        sinks: Iterable[AuditSink],
        *,
        redactor: Redactor | None = None,
        on_failure: Callable[[int, BaseException], None] | None = None,
    ) -> None:
        self.sinks: tuple[AuditSink, ...] = tuple(sinks)
        self._redactor = redactor or Redactor()
        self._on_failure = on_failure
        self._failures = 0
        self._last_errors: dict[int, str] = {}

    @property
    def failures(self) -> int:
        """How many sink writes have failed since this sink was created."""
        return self._failures

    @property
    def last_errors(self) -> Mapping[int, str]:
        """Sink index → the last error it raised (redacted), for health reports."""
        return dict(self._last_errors)

    async def record(self, record: AuditRecord) -> None:
        async with anyio.create_task_group() as tg:
            for index, sink in enumerate(self.sinks):
                tg.start_soon(self._one, index, sink, record)

    async def _one(self, index: int, sink: AuditSink, record: AuditRecord) -> None:
        try:
            await sink.record(record)
        except Exception as exc:  # any sink error: report, never propagate
            self._failures += 1
            message = self._redactor.redact_text(f"{type(exc).__name__}: {exc}")
            self._last_errors[index] = message
            logger.error(
                "audit sink #%d (%s) failed to record call %s: %s",
                index,
                type(sink).__name__,
                record.call_id,
                message,
            )
            if self._on_failure is not None:
                try:
                    self._on_failure(index, exc)
                except Exception as callback_exc:
                    logger.error(
                        "the audit failure callback failed: %s", type(callback_exc).__name__
                    )
