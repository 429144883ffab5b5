"""The bounds of an HTTP request's head: ``limits.http`` in the deployment file.

::

    limits:
      http:
        max_url_bytes: 8192        # the request target (path and query): 414 URL_TOO_LONG
        max_header_bytes: 8192     # one header field, name and value: 431 HEADERS_TOO_LARGE
        max_head_bytes: 32768      # request line and every header field: 431
        max_headers: 100           # header fields: 431
        head_timeout_s: 30         # a head not whole this long after its first byte: 408

The defaults are nginx's and Apache's (8 KiB lines, a 32 KiB head, 100 fields); the timeout is
the body's (``BODY_TIMEOUT``). ``charter serve`` applies them to either HTTP implementation
(:mod:`charter.server.http_head`); see ``docs/server.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from charter.errors import ConfigError

KEY = "http"
_KEYS = frozenset(
    {"max_url_bytes", "max_header_bytes", "max_head_bytes", "max_headers", "head_timeout_s"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeadLimits:
    """How large a request head may be, and how long it may take to arrive."""

    max_url_bytes: int = 8 * 1024
    max_header_bytes: int = 8 * 1024
    max_head_bytes: int = 32 * 1024
    max_headers: int = 100
    head_timeout_s: float = 30.0

    def describe(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in sorted(_KEYS)}


class Reader(Protocol):
    def mapping(self, value: Any, where: str, allowed: frozenset[str]) -> Any: ...
    def positive(self, value: Any, where: str, *, integer: bool = False) -> float: ...
    def fail(self, where: str, message: str) -> ConfigError: ...


def head_limits(r: Reader, section: Any) -> HeadLimits:
    """``limits.http`` of the deployment file (``section`` is the ``limits`` mapping)."""
    if KEY not in section or section[KEY] is None:
        return HeadLimits()
    where = f"limits.{KEY}"
    given = r.mapping(section[KEY], where, _KEYS)
    values: dict[str, Any] = {}
    for name in _KEYS & set(given):
        integer = name != "head_timeout_s"
        number = r.positive(given[name], f"{where}.{name}", integer=integer)
        values[name] = int(number) if integer else number
    limits = HeadLimits(**values)
    if limits.max_url_bytes > limits.max_head_bytes:
        raise r.fail(f"{where}.max_url_bytes", "must not be larger than max_head_bytes")
    if limits.max_header_bytes > limits.max_head_bytes:
        raise r.fail(f"{where}.max_header_bytes", "must not be larger than max_head_bytes")
    return limits
