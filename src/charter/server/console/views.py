"""Formatting for the console's templates: times, countdowns, JSON, event one-liners."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def parse_at(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def seconds_left(expires_at: Any, now: datetime | None = None) -> int:
    at = parse_at(expires_at)
    if at is None:
        return 0
    current = now or datetime.now(UTC)
    return max(0, int((at - current).total_seconds()))


def duration(seconds: int) -> str:
    """``4m 05s`` / ``1h 02m`` / ``12s`` — what the countdown script also writes."""
    if seconds <= 0:
        return "expired"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def time_left(expires_at: Any) -> str:
    return duration(seconds_left(expires_at))


def when(value: Any) -> str:
    at = parse_at(value)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at is not None else "—"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def compact(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ms(value: Any) -> str:
    if isinstance(value, int | float):
        return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"
    return "—"


_KEYS = (
    "status",
    "stage",
    "tool_id",
    "call_id",
    "approval_id",
    "actor",
    "outcome",
    "reason",
    "task_id",
    "path",
    "context_id",
    "profile",
)


def event_line(event_type: str, payload: Mapping[str, Any]) -> str:
    """A one-line summary of an event for the timeline (never the raw arguments)."""
    parts = [f"{k}={payload[k]}" for k in _KEYS if payload.get(k) not in (None, "", [], {})]
    return " · ".join(parts) if parts else event_type


FILTERS = {
    "time_left": time_left,
    "seconds_left": seconds_left,
    "when": when,
    "pretty": pretty,
    "compact": compact,
    "ms": ms,
}
GLOBALS = {"event_line": event_line}
