"""Structured JSON logs: one object per line, with run, call and trace ids where known.

Log records carry their fields in ``extra={"charter": {...}}``; the formatter writes them
beside the time, level, logger and message. Request logs name the route template, status,
duration, principal and tenant — never arguments, bodies, headers or credentials.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from charter.kernel.redaction import LOG_FILTER

LOGGER = "charter.server"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "charter", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if v is not None})
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_type"] = record.exc_info[0].__name__
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str = "info") -> None:
    """Send ``charter.*``, uvicorn's error log and every other logger (the root's handler:
    HTTP clients, SDKs) to stderr as JSON lines, through the redacting filter: the known
    secrets of every open runtime are scrubbed from each record (docs/privacy.md)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(LOG_FILTER)
    for name in ("charter", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def log(level: int, message: str, **fields: Any) -> None:
    logging.getLogger(LOGGER).log(level, message, extra={"charter": fields})
