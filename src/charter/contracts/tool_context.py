"""The ``Context`` object Charter injects into a tool function that asks for one.

A parameter annotated with :class:`Context` is excluded from the tool's argument schema; the
kernel fills it when the call is dispatched. Tools use it for the call id, the idempotency key
to pass on to a back end, attribution, a cancellation signal, ``progress("...")`` messages and
— for a tool whose contract
declares ``artifacts`` and that runs in the Python executor — ``artifacts``, the run's confined,
create-only file writer (see ``docs/artifacts.md``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class ArtifactFiles(Protocol):
    """The files of the call's run, as a tool sees them (``ctx.artifacts``).

    ``open`` / ``put`` write create-only, confined to the run; what the call wrote is registered
    when it succeeds and removed when it fails. ``read`` returns a declared input artifact,
    checksum-verified. The methods block (file I/O): call them from sync tools, or through
    ``anyio.to_thread.run_sync`` from async ones when files are large.
    """

    def open(
        self,
        path: str,
        *,
        media_type: str = "application/octet-stream",
        type: str = "file",
        versioned: bool = False,
    ) -> Any: ...

    def put(
        self,
        path: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        type: str = "file",
        versioned: bool = False,
    ) -> Any: ...

    def read(self, artifact_id: str) -> bytes: ...


_MAKING = threading.Lock()  # makes each CancelFlag's condition exactly once


class CancelFlag(threading.Event):
    """A :class:`threading.Event` whose condition is made on first use.

    ``threading.Event()`` costs about 1.5 us (its ``Condition`` probes the lock by raising
    and catching three ``AttributeError``), once per governed call for a flag that is almost
    never set nor waited on. :meth:`is_set` reads the flag alone; ``set``, ``clear`` and
    ``wait`` take the condition, made here under a lock the first time any thread needs it.
    """

    def __init__(self) -> None:  # not Event.__init__: no condition yet
        self._flag = False
        self._made: threading.Condition | None = None

    @property
    def _cond(self) -> threading.Condition:  # what Event's methods use
        cond = self._made
        if cond is None:
            with _MAKING:
                cond = self._made
                if cond is None:
                    cond = self._made = threading.Condition(threading.Lock())
        return cond


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
    artifacts: ArtifactFiles | None = field(default=None, compare=False, repr=False)
    cancelled: threading.Event = field(default_factory=CancelFlag, compare=False)
    progress_sink: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    def progress(self, message: str) -> None:
        """Report progress: recorded as a ``tool_progress`` event (stage ``message``) of the
        run, redacted as one stream with the call's other messages, and streamed to every
        reader of the run's events. Safe from a worker thread and from async code; never
        raises, never blocks; a no-op where nobody records progress (docs/tools.md)."""
        if self.progress_sink is not None:
            self.progress_sink(str(message))

    @property
    def is_cancelled(self) -> bool:
        """True once the kernel has asked the call to stop (deadline or cancellation)."""
        return self.cancelled.is_set()
