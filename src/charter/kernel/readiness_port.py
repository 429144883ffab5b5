"""The readiness port: what the kernel reads before it discloses a tool.

The runtime hands the kernel a :class:`ReadinessSource` (``charter.deploy.readiness.Readiness``
checks every bound tool's executor); the kernel omits optional tools that are not ready and
refuses a context whose required tools are not (``TOOL_NOT_READY``), and asks
:meth:`ReadinessSource.check_call` again before the intent of every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from charter.contracts.model import ToolContract
from charter.errors import Failure

__all__ = ["ReadinessReport", "ReadinessSource", "ToolReadiness"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReadiness:
    """One tool's readiness: expected (the Build) against reported (the executor).

    A tool nothing serves (no binding, or only the default executor and no code for it) is
    *not bound*: ``bound`` false, never required, never offered, and it blocks nothing.
    """

    tool_id: str
    executor: str  # python | subprocess | http | mcp; "none" when not bound
    endpoint: str | None  # the base URL for http
    required: bool
    ready: bool
    expected_version: str
    expected_digest: str
    reported_version: str | None = None
    reported_digest: str | None = None
    reason: str | None = None
    message: str | None = None
    address: str | None = None  # http: the address requests go to (pinned at this check)
    bound: bool = True

    @property
    def status(self) -> str:
        """``ready``, ``not_bound`` or ``not_ready``."""
        if not self.bound:
            return "not_bound"
        return "ready" if self.ready else "not_ready"

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool_id,
            "executor": self.executor if self.bound else None,
            "endpoint": self.endpoint,
            "address": self.address,
            "required": self.required,
            "status": self.status,
            "expected": {"version": self.expected_version, "digest": self.expected_digest},
            "reported": {"version": self.reported_version, "digest": self.reported_digest},
            "reason": self.reason,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadinessReport:
    tools: tuple[ToolReadiness, ...]
    checked_at: str  # RFC 3339, UTC

    @property
    def ready(self) -> bool:
        """Every *required* tool is ready (optional ones may be missing)."""
        return all(t.ready for t in self.tools if t.required)

    def get(self, tool_id: str) -> ToolReadiness | None:
        return next((t for t in self.tools if t.tool_id == tool_id), None)

    def not_ready(self) -> tuple[ToolReadiness, ...]:
        """Bound tools that are not ready (tools that are not bound are not listed)."""
        return tuple(t for t in self.tools if t.bound and not t.ready)

    def not_bound(self) -> tuple[ToolReadiness, ...]:
        return tuple(t for t in self.tools if not t.bound)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "checked_at": self.checked_at,
            "tools": [t.to_dict() for t in self.tools],
        }


class ReadinessSource(Protocol):
    """Reports the readiness of every tool of the Build, bound or not (cached by the
    implementation)."""

    async def report(self, *, fresh: bool = False) -> ReadinessReport: ...

    async def check_call(self, contract: ToolContract) -> Failure | None:
        """Before a call's intent: ``None`` if its remote executor still serves ``contract``
        as the Build says, else the refusal (``EXECUTOR_CONTRACT_CHANGED`` /
        ``TOOL_NOT_READY``)."""
        ...
