"""``charter serve``'s logging: one JSON handler on Charter's loggers and the root's, through the
redacting filter, so a third-party library's DEBUG record loses a known secret too."""

from __future__ import annotations

import io
import logging
import sys
import urllib.parse

import pytest

from charter.kernel.redaction import LOG_FILTER, Redactor
from charter.server.logs import configure_logging

SECRET = "upstream-token-5f1e0c9a7b3d"


def test_every_record_passes_the_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    loggers = {name: logging.getLogger(name) for name in ("charter", "uvicorn.error")}
    saved_named = {n: (lg.handlers[:], lg.level, lg.propagate) for n, lg in loggers.items()}
    redactor = Redactor().remember([SECRET])
    LOG_FILTER.learn(redactor)
    try:
        configure_logging("debug")
        logging.getLogger("httpx.privacy-test").debug(
            "HTTP Request: GET https://api.example/?token=%s", urllib.parse.quote(SECRET)
        )
        logging.getLogger("charter.server").info("calling with %s", SECRET)
    finally:
        LOG_FILTER.forget(redactor)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, (handlers, level, propagate) in saved_named.items():
            loggers[name].handlers[:] = handlers
            loggers[name].setLevel(level)
            loggers[name].propagate = propagate
    text = stream.getvalue()
    assert '"logger": "httpx.privacy-test"' in text
    assert "HTTP Request: GET https://api.example/?token=[REDACTED]" in text
    assert "calling with [REDACTED]" in text
    assert SECRET not in text
    assert urllib.parse.quote(SECRET) not in text
