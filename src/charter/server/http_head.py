"""Bounded request heads for uvicorn, under either of its HTTP/1.1 implementations.

uvicorn buffers a request's head until it is whole: with httptools without any bound (a
client could send megabytes of header fields, one huge field or 100,000 small ones, and the
server kept them all), with h11 up to 16 KiB, then answering a plain-text 400; a too-long URL
was a plain-text 400 as well; and a head trickled a byte at a time held its connection for
ever. The protocol classes here (h11's; httptools' in :mod:`.http_head_httptools`, both picked
by :func:`charter.server.http_protocol.head_limited_protocol`) enforce
:class:`~charter.deploy.http_limits.HeadLimits` as the bytes arrive — buffering stops once a
bound is passed — and answer with a problem document as every other error's:

- a request target longer than ``max_url_bytes``: ``414 URL_TOO_LONG``;
- a head (request line and header fields) larger than ``max_head_bytes``, one header field
  larger than ``max_header_bytes`` or more than ``max_headers`` fields:
  ``431 HEADERS_TOO_LARGE`` (RFC 6585);
- a head not whole ``head_timeout_s`` after its first byte: ``408 HEADERS_TIMEOUT`` (a
  connection on which nothing at all arrives in that time is closed without an answer, as an
  idle kept-alive one is);
- anything else the parser refuses (a malformed request line or field, a bad chunk size):
  ``400 REQUEST_MALFORMED`` — uvicorn answered a plain-text 400.

The connection is closed after each of these. The answer never quotes what was sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from charter.contracts.problem import PROBLEM_MEDIA_TYPE, problem_body
from charter.deploy.http_limits import HeadLimits
from charter.errors import ErrorCode
from charter.server.logs import log
from charter.server.problems import STATUS_BY_REASON


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request head is refused, as its problem answer says."""

    reason: str
    detail: str

    @property
    def status(self) -> int:
        return STATUS_BY_REASON[self.reason]

    def answer(self, default_headers: Iterable[tuple[bytes, bytes]]) -> bytes:
        """The whole HTTP/1.1 answer: the problem document, then the connection closes."""
        body = json.dumps(
            problem_body(
                status=self.status,
                code=ErrorCode.INVALID_INPUT,
                reason=self.reason,
                detail=self.detail,
            )
        ).encode()
        lines = [f"HTTP/1.1 {self.status} {HTTPStatus(self.status).phrase}".encode()]
        lines += [name + b": " + value for name, value in default_headers]
        lines += [
            b"content-type: " + PROBLEM_MEDIA_TYPE.encode(),
            b"content-length: " + str(len(body)).encode(),
            b"connection: close",
        ]
        return b"\r\n".join(lines) + b"\r\n\r\n" + body


def url_too_long(limits: HeadLimits) -> Refusal:
    return Refusal(
        "URL_TOO_LONG", f"the request target (URL) is longer than {limits.max_url_bytes} bytes"
    )


def head_too_large(limits: HeadLimits) -> Refusal:
    return Refusal(
        "HEADERS_TOO_LARGE",
        f"the request head (request line and header fields) is larger than "
        f"{limits.max_head_bytes} bytes",
    )


def header_too_large(limits: HeadLimits) -> Refusal:
    return Refusal(
        "HEADERS_TOO_LARGE", f"a header field is larger than {limits.max_header_bytes} bytes"
    )


def too_many_headers(limits: HeadLimits) -> Refusal:
    return Refusal(
        "HEADERS_TOO_LARGE", f"the request has more than {limits.max_headers} header fields"
    )


def head_timeout(limits: HeadLimits) -> Refusal:
    return Refusal(
        "HEADERS_TIMEOUT",
        f"the request head did not arrive whole within {limits.head_timeout_s:g} seconds",
    )


def malformed() -> Refusal:
    """Anything else the parser refuses (uvicorn's plain-text 400 "Invalid HTTP request")."""
    return Refusal("REQUEST_MALFORMED", "the request is not a valid HTTP/1.1 request")


class HeadRefused(Exception):
    """Raised inside a parser callback to stop parsing; the refusal is on the guard."""


class HeadGuard:
    """One connection's watch over its request heads: the deadline of the head arriving,
    and the refusal (if any) its answer will carry."""

    def __init__(
        self,
        limits: HeadLimits,
        loop: asyncio.AbstractEventLoop,
        expired: Callable[[], None],
    ) -> None:
        self.limits = limits
        self.refusal: Refusal | None = None
        self.started = False  # a byte of the head awaited has arrived
        self.answered = False  # a refusal was sent: the connection is ending
        self._loop = loop
        self._expired = expired
        self._timer: asyncio.TimerHandle | None = None

    def waiting(self) -> None:
        """A head is awaited: its deadline runs (from now, unless it already does)."""
        if self._timer is None:
            self._timer = self._loop.call_later(self.limits.head_timeout_s, self._fire)

    def received(self) -> None:
        """A byte of the awaited head arrived: its deadline runs from the first."""
        if not self.started:
            self.started = True
            self.done_waiting()
        self.waiting()

    def done_waiting(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def done(self) -> None:
        """The head is whole (or the connection gone): no deadline until the next one."""
        self.started = False
        self.done_waiting()

    def refuse(self, refusal: Refusal) -> Refusal:
        self.refusal = refusal
        return refusal

    def _fire(self) -> None:
        self._timer = None
        self._expired()


if TYPE_CHECKING:
    _ProtocolBase = asyncio.Protocol
else:
    _ProtocolBase = object


class HeadGuarded(_ProtocolBase):
    """What both protocols (this module's and :mod:`.http_head_httptools`') share, put before
    uvicorn's protocol class: the connection's :class:`HeadGuard`, whose head deadline runs
    from the connection's start and stops with it. ``limits`` and ``on_refused`` (called with
    a refusal's reason, for the server's metrics) are set per server by
    :func:`charter.server.http_protocol.head_limited_protocol`."""

    limits: ClassVar[HeadLimits] = HeadLimits()
    on_refused: ClassVar[Callable[[str], None] | None] = None
    loop: asyncio.AbstractEventLoop

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = HeadGuard(self.limits, self.loop, lambda: head_expired(self, self.guard))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.guard.waiting()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.done()
        super().connection_lost(exc)


LINGER_S = 2.0  # how long a refused connection's further bytes are read and dropped


def send_refusal(protocol: Any, refusal: Refusal) -> None:
    """Answer ``refusal`` on ``protocol``'s connection and end it.

    The answer is followed by our half of the close; what the client still sends is read and
    dropped for at most :data:`LINGER_S` before the connection closes (a lingering close, as
    nginx's: closing with its bytes unread would reset the connection, and the client could
    lose the answer)."""
    transport: asyncio.Transport = protocol.transport
    guard: HeadGuard = protocol.guard
    guard.done()  # no deadline on a connection that is ending
    if transport.is_closing() or guard.answered:
        return
    guard.answered = True
    transport.write(refusal.answer(protocol.server_state.default_headers))
    if transport.can_write_eof():
        transport.write_eof()
        protocol.loop.call_later(LINGER_S, transport.close)
    else:  # pragma: no cover - TLS transports cannot half-close
        transport.close()
    counted = type(protocol).on_refused
    if counted is not None:
        try:
            counted(refusal.reason)
        except Exception:  # pragma: no cover - metrics never stop an answer
            logging.getLogger(__name__).exception("counting a refused head failed")
    client = protocol.client
    log(
        logging.WARNING,
        "request head refused",
        status=refusal.status,
        reason=refusal.reason,
        client=client[0] if client else None,
    )


def head_expired(protocol: Any, guard: HeadGuard) -> None:
    """The head deadline of ``protocol``'s connection passed (either implementation)."""
    cycle = protocol.cycle
    if cycle is not None and not cycle.response_complete:
        guard.waiting()  # an answer is still on its way: the next head waits for it
        return
    if not guard.started:  # nothing arrived: closed without an answer, as an idle one
        protocol.transport.close()
        return
    send_refusal(protocol, guard.refuse(head_timeout(guard.limits)))


def refusal_of(
    target: bytes, headers: Iterable[tuple[bytes, bytes]], limits: HeadLimits
) -> Refusal | None:
    """The refusal of a whole head's target and fields (h11 hands them over at once)."""
    if len(target) > limits.max_url_bytes:
        return url_too_long(limits)
    for count, (name, value) in enumerate(headers, 1):
        if count > limits.max_headers:
            return too_many_headers(limits)
        if len(name) + len(value) > limits.max_header_bytes:
            return header_too_large(limits)
    return None


def overflow_refusal(buffered: bytes, limits: HeadLimits) -> Refusal:
    """The refusal of a head that outgrew ``max_head_bytes`` before it was whole: 414 when
    its request target alone is too long, else 431."""
    line = buffered.split(b"\n", 1)[0]
    parts = line.split(b" ", 2)
    if len(parts) > 1 and len(parts[1]) > limits.max_url_bytes:
        return url_too_long(limits)
    return head_too_large(limits)


class _BoundedConnection(h11.Connection):
    """h11's server connection whose head buffer is ``max_head_bytes`` and whose heads are
    checked against the other bounds before uvicorn sees them."""

    def __init__(self, limits: HeadLimits) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_head_bytes)
        self.limits = limits
        self.refusal: Refusal | None = None

    def next_event(self) -> Any:
        awaiting_head = self.their_state is h11.IDLE
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            if awaiting_head and exc.error_status_hint == 431 and self.refusal is None:
                self.refusal = overflow_refusal(self.trailing_data[0], self.limits)
            raise
        if isinstance(event, h11.Request):
            self.refusal = refusal_of(event.target, event.headers, self.limits)
            if self.refusal is not None:
                raise h11.RemoteProtocolError(self.refusal.detail, self.refusal.status)
        return event


class H11HeadProtocol(HeadGuarded, H11Protocol):
    """uvicorn's h11 protocol with bounded request heads (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = self.bounded = _BoundedConnection(self.limits)

    def data_received(self, data: bytes) -> None:
        if self.bounded.refusal is not None or self.guard.refusal is not None:
            return  # refused: dropped while the connection lingers
        if self.conn.their_state is h11.IDLE:
            self.guard.received()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self.guard.done()

    def send_400_response(self, msg: str) -> None:
        send_refusal(self, self.guard.refuse(self.bounded.refusal or malformed()))
