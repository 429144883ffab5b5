"""Open event streams, counted per tenant and per principal (``limits.streams``).

Every SSE stream the server serves — a run's events (``GET /v1/runs/{id}/events``), a chat
turn (``POST /v1/chat``, ``GET /v1/chat/{id}/events``) and the console's live lists — takes a
:class:`Slot` before it starts and gives it back when it ends. A caller at its tenant's or its
own cap is refused before anything starts (no chat turn, no store wait): ``ResourceLimit`` /
``TOO_MANY_STREAMS`` with ``details: {scope, limit, retry_after}``, which the API answers
``429`` with ``Retry-After`` (the console: its error page, ``429``). The detail names the
scope and the setting, never the tenant or the principal.

A slot is given back however the stream ends — the run's end, the client gone, the server
stopping, an exception — because :class:`HeldStream` releases it when its ASGI call returns
or raises; a stream never called at all (dropped between the route and the server) releases
it when the answer is collected. Releasing twice is harmless.

The counts live in this process: replicas each count their own streams.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterable, Mapping
from typing import Any, TypeVar

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from charter.deploy.stream_limits import StreamLimits
from charter.errors import ResourceLimit
from charter.kernel.principals import Principal
from charter.server.metrics import ServerMetrics
from charter.server.problems import problem_schema_ref

RETRY_AFTER_S = 5
"""The ``Retry-After`` of a refused stream: streams end when their clients leave or their run
ends, never on a clock, so this is a polite pause rather than a promise."""

SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
K = TypeVar("K")


def retry_after_responses() -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entry of a stream route's refusal: 429, a problem."""
    return {
        429: {
            "description": "TOO_MANY_STREAMS: the tenant's or the principal's open event "
            "streams are at limits.streams; nothing was started",
            "content": problem_schema_ref(),
            "headers": {
                "Retry-After": {
                    "description": "seconds to wait before retrying",
                    "schema": {"type": "integer"},
                }
            },
        }
    }


class Slot:
    """One open stream's place in the counts; :meth:`release` gives it back (once)."""

    def __init__(self, slots: StreamSlots, tenant: str, principal: str, stream: str) -> None:
        self._slots, self._keys, self.stream = slots, (tenant, principal), stream
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._slots._release(self._keys, self.stream)


class StreamSlots:
    """The open streams of one server process, against its :class:`StreamLimits`."""

    def __init__(
        self, limits: StreamLimits | None = None, metrics: ServerMetrics | None = None
    ) -> None:
        self.limits = limits or StreamLimits()
        self._metrics = metrics
        self._lock = threading.Lock()
        self._tenants: dict[str, int] = {}
        self._principals: dict[tuple[str, str], int] = {}

    def open(self, principal: Principal, stream: str) -> Slot:
        """A slot for a new stream of ``principal`` (``stream``: ``runs``, ``chat`` or
        ``console``, the metric's label), or ``ResourceLimit`` / ``TOO_MANY_STREAMS``."""
        tenant, key = principal.tenant, (principal.tenant, principal.name)
        with self._lock:
            for scope, limit, count in (
                ("tenant", self.limits.tenant, self._tenants.get(tenant, 0)),
                ("principal", self.limits.principal, self._principals.get(key, 0)),
            ):
                if limit is not None and count >= limit:
                    if self._metrics is not None:
                        self._metrics.streams_refused.labels(scope=scope).inc()
                    raise ResourceLimit(
                        f"too many event streams open: the {scope}'s limit is {limit} "
                        f"(limits.streams.{scope}); close one, or retry after "
                        f"{RETRY_AFTER_S} s",
                        reason="TOO_MANY_STREAMS",
                        retryable=True,
                        details={"scope": scope, "limit": limit, "retry_after": RETRY_AFTER_S},
                    )
            self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
            self._principals[key] = self._principals.get(key, 0) + 1
        if self._metrics is not None:
            self._metrics.streams_open.labels(stream=stream).inc()
        return Slot(self, tenant, principal.name, stream)

    def _release(self, key: tuple[str, str], stream: str) -> None:
        with self._lock:
            _less(self._tenants, key[0])
            _less(self._principals, key)
        if self._metrics is not None:
            self._metrics.streams_open.labels(stream=stream).dec()

    def open_count(self, tenant: str, principal: str | None = None) -> int:
        """Streams open now for ``tenant`` (or one of its principals)."""
        with self._lock:
            if principal is None:
                return self._tenants.get(tenant, 0)
            return self._principals.get((tenant, principal), 0)


def _less(counts: dict[K, int], key: K) -> None:
    """One fewer under ``key``; a key at zero is dropped, so idle callers cost nothing."""
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


class HeldStream(StreamingResponse):
    """A ``text/event-stream`` answer that holds its :class:`Slot` until it has ended."""

    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterable[bytes],
        *,
        slot: Slot,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, headers={**SSE_HEADERS, **(headers or {})})
        self.slot = slot
        weakref.finalize(self, slot.release)  # an answer never served still gives it back

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()
