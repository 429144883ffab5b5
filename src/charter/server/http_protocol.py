"""uvicorn's protocol class for ``charter serve``: either HTTP/1.1 implementation, with request
heads bounded (:mod:`charter.server.http_head`)."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Literal

from charter.deploy.http_limits import HeadLimits
from charter.server.http_head import H11HeadProtocol

HttpImplementation = Literal["auto", "httptools", "h11"]


def head_limited_protocol(
    limits: HeadLimits, http: HttpImplementation = "auto"
) -> type[asyncio.Protocol]:
    """uvicorn's protocol class (``uvicorn.Config(http=...)``) for ``http`` — ``auto``:
    httptools when it is installed, else h11, as uvicorn picks — enforcing ``limits``."""
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    base: type[asyncio.Protocol] = H11HeadProtocol
    if http == "httptools":
        from charter.server.http_head_httptools import HttpToolsHeadProtocol

        base = HttpToolsHeadProtocol
    return type(base.__name__, (base,), {"limits": limits})
