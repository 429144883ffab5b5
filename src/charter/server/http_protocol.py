"""uvicorn's protocol class for ``charter serve``: either HTTP/1.1 implementation, with request
heads bounded (:mod:`charter.server.http_head`)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Literal

from charter.deploy.http_limits import HeadLimits
from charter.server.http_head import H11HeadProtocol

HttpImplementation = Literal["auto", "httptools", "h11"]


def head_limited_protocol(
    limits: HeadLimits,
    http: HttpImplementation = "auto",
    on_refused: Callable[[str], None] | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's protocol class (``uvicorn.Config(http=...)``) for ``http`` — ``auto``:
    httptools when it is installed, else h11, as uvicorn picks — enforcing ``limits``;
    ``on_refused`` is called with each refused head's reason (see :func:`counted_in`)."""
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    base: type[asyncio.Protocol] = H11HeadProtocol
    if http == "httptools":
        from charter.server.http_head_httptools import HttpToolsHeadProtocol

        base = HttpToolsHeadProtocol
    attrs = {"limits": limits, "on_refused": staticmethod(on_refused) if on_refused else None}
    return type(base.__name__, (base,), attrs)


def counted_in(app: object) -> Callable[[str], None]:
    """An ``on_refused`` counting refused heads in the metrics of ``app`` (made by
    :func:`charter.server.app.create_app`), once its server state exists."""

    def count(reason: str) -> None:
        state = getattr(getattr(app, "state", None), "charter", None)
        if state is not None:
            state.metrics.record_head_refused(reason)

    return count
