"""The v2 result envelope every entry point returns for a call (DESIGN §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from charter.errors import Failure

ENVELOPE_SCHEMA_VERSION = 2


class CallStatus(StrEnum):
    """A call's state (DESIGN §2), plus ``conflict`` for an idempotency conflict answer."""

    REJECTED = "rejected"  # invalid input; nothing recorded as intent
    DENIED = "denied"  # authorization, budget, or a rejected approval
    PENDING_APPROVAL = "pending_approval"
    DISPATCHING = "dispatching"  # intent durable, outcome not yet known
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"  # dispatched, outcome cannot be known; an operator resolves it
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"  # an operator confirmed nothing is running
    CONFLICT = "conflict"  # same call id, different arguments


TERMINAL_STATES = frozenset(
    {
        CallStatus.DENIED,
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.UNKNOWN,
        CallStatus.CANCELLED,
        CallStatus.ABANDONED,
    }
)
"""States a reserved call can end in. ``unknown`` is terminal for dispatch (never retried)
but an operator may still resolve it to succeeded, failed or abandoned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    duration_ms: float = 0.0
    cached: bool = False
    attempts: int = 0
    output_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "duration_ms": round(self.duration_ms, 3),
            "cached": self.cached,
            "attempts": self.attempts,
            "output_bytes": self.output_bytes,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """What a call answers. ``error`` is set for every status but ``succeeded``/pending."""

    call_id: str
    status: CallStatus
    data: Any = field(default=None, repr=False)  # a tool result: never printed
    artifact_ids: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    error: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None
    metrics: Metrics = field(default_factory=Metrics)
    trace: dict[str, str] | None = None
    context_id: str | None = None
    run_id: str | None = None
    tool: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.SUCCEEDED

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": ENVELOPE_SCHEMA_VERSION,
            "call_id": self.call_id,
            "status": self.status.value,
            "data": self.data,
            "artifact_ids": list(self.artifact_ids),
            "warnings": list(self.warnings),
            "error": self.error,
            "metrics": self.metrics.to_dict(),
            "trace": self.trace,
        }
        if self.approval is not None:
            out["approval"] = self.approval
        if self.context_id is not None:
            out["context_id"] = self.context_id
        if self.run_id is not None:
            out["run_id"] = self.run_id
        if self.tool is not None:
            out["tool"] = self.tool
        return out


def error_dict(exc: Failure) -> dict[str, Any]:
    """The envelope's ``error`` object (code, reason, message, retryable)."""
    out: dict[str, Any] = {
        "code": exc.code.value,
        "reason": exc.reason,
        "message": exc.message,
        "retryable": exc.retryable,
    }
    retry_after = exc.details.get("retry_after") if exc.details else None
    if isinstance(retry_after, int | float):
        out["retry_after"] = retry_after  # seconds (rate and concurrency limits)
    builds = {k: exc.details[k] for k in _BUILD_DETAILS if k in exc.details}
    if builds:  # CONTEXT_BUILD_CHANGED: the Build the context needs, ours, the current one
        out["details"] = builds
    return out


_BUILD_DETAILS = ("context_build", "build", "current_build")
"""The details an envelope's ``error`` shows (Build digests, never argument values)."""
