"""uvicorn's httptools protocol with bounded request heads (see :mod:`.http_head`).

httptools keeps a header field's bytes to itself until the field is whole, so the head's size
is counted here, as it is fed to the parser: at most ``max_head_bytes`` + 1 bytes of a head
are fed before it must be whole. The request target arrives piece by piece (``on_url``) and
is refused as soon as it is too long; each whole field is counted and measured.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from charter.server.http_head import (
    HeadGuarded,
    HeadRefused,
    head_too_large,
    header_too_large,
    malformed,
    send_refusal,
    too_many_headers,
    url_too_long,
)


class HttpToolsHeadProtocol(HeadGuarded, HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded request heads (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_body = False  # between a head's end and its message's end
        self.head_bytes = 0  # bytes of the current head fed so far
        self.header_count = 0

    def data_received(self, data: bytes) -> None:
        # Fed in slices, so a head that began inside one is at most a slice past its count.
        step = self.limits.max_head_bytes + 1
        while data and self._reading():
            if self.guard.refusal is not None:
                return  # refused: dropped while the connection lingers
            if self.in_body:
                chunk, data = data[:step], data[step:]
            else:
                self.guard.received()
                room = step - self.head_bytes
                chunk, data = data[:room], data[room:]
                self.head_bytes += len(chunk)
            super().data_received(chunk)
            if not self.in_body and self.head_bytes > self.limits.max_head_bytes:
                self._refuse()
                return

    def _reading(self) -> bool:
        return not self.transport.is_closing() and self.transport.get_protocol() is self

    def _refuse(self) -> None:
        refusal = self.guard.refusal or self.guard.refuse(head_too_large(self.limits))
        send_refusal(self, refusal)

    # parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.header_count = 0
        self.guard.received()

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > self.limits.max_url_bytes:
            self.guard.refuse(url_too_long(self.limits))
            raise HeadRefused
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_count += 1
        if self.header_count > self.limits.max_headers:
            self.guard.refuse(too_many_headers(self.limits))
            raise HeadRefused
        if len(name) + len(value) > self.limits.max_header_bytes:
            self.guard.refuse(header_too_large(self.limits))
            raise HeadRefused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.guard.done()
        self.in_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.in_body = False
        self.head_bytes = 0
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if self.guard.refusal is None:
            self.guard.refuse(malformed())
        self._refuse()
