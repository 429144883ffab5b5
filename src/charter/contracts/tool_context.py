"""The ``Context`` object Charter injects into a tool function that asks for one.

A parameter annotated with :class:`Context` is excluded from the tool's argument schema; the
kernel fills it when the call is dispatched. Tools use it for the call id, the idempotency key
to pass on to a back end, attribution, and a cancellation signal.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What a tool may know about the call it is serving."""

    call_id: str
    idempotency_key: str
    context_id: str
    run_id: str
    tool_id: str
    tenant: str | None = None
    principal: str | None = None
    agent: str | None = None
    task_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)

    @property
    def is_cancelled(self) -> bool:
        """True once the kernel has asked the call to stop (deadline or cancellation)."""
        return self.cancelled.is_set()
