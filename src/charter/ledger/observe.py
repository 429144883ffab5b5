"""What ``enforce`` would have denied: the observe-mode report (``charter audit observe``).

A call that runs in ``observe`` mode records, in its intent (the ``tool_progress`` event of
stage ``started``), each decision ``enforce`` would have taken against it under
``execution_audit.would`` (``{phase, reason}``). :func:`observe_report` reads those events
over a tenant's runs and a time range and counts them by tool, phase and reason.

``since`` and ``until`` are RFC 3339 date or date-times (UTC); ``until`` compares as a
prefix, so ``--until 2026-01-31`` includes the whole day.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from charter.errors import InvalidInput
from charter.ledger.events import Event

_AT = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:\.\d+)?)?)?Z?)?$")
PAGE = 1000


def time_bound(value: str | None, field: str) -> str | None:
    """A ``since`` / ``until`` bound, checked: an RFC 3339 date or date-time (UTC)."""
    if value is None or value == "":
        return None
    if not _AT.match(value):
        raise InvalidInput(
            f"{field} must be an RFC 3339 date or date-time in UTC, like 2026-01-31T09:00",
            reason="TIME_RANGE_INVALID",
            details={"field": field},
        )
    return value.replace(" ", "T").removesuffix("Z")


@dataclass(slots=True)
class ObservedRow:
    tool: str
    phase: str
    reason: str
    count: int
    first_at: str
    last_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "phase": self.phase,
            "reason": self.reason,
            "count": self.count,
            "first_at": self.first_at,
            "last_at": self.last_at,
        }


@dataclass(slots=True)
class ObserveReport:
    rows: list[ObservedRow]
    observed_calls: int  # calls that ran in observe mode in the range
    runs_scanned: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "observed_calls": self.observed_calls,
            "runs_scanned": self.runs_scanned,
            "would_deny": [r.to_dict() for r in self.rows],
        }


async def observe_report(
    run_ids: Sequence[str],
    events: Callable[[str, int, int], Awaitable[Sequence[Event]]],
    *,
    since: str | None = None,
    until: str | None = None,
) -> ObserveReport:
    """Count what enforce would have decided against observed calls, by tool and reason.

    ``events(run_id, after, limit)`` reads a run's events in order (the runtime's
    :meth:`~charter.runtime.Runtime.events`)."""
    since = time_bound(since, "since")
    until = time_bound(until, "until")
    found: dict[tuple[str, str, str], ObservedRow] = {}
    observed = 0
    for run_id in run_ids:
        after = 0
        while True:
            page = await events(run_id, after, PAGE)
            for event in page:
                p = event.payload
                if event.type != "tool_progress" or p.get("stage") != "started":
                    continue
                if p.get("mode") != "observe":
                    continue
                if (since and event.at < since) or (until and event.at[: len(until)] > until):
                    continue
                observed += 1
                would = (p.get("execution_audit") or {}).get("would") or []
                for entry in would:
                    key = (str(p.get("tool_id")), str(entry.get("phase")), str(entry.get("reason")))
                    row = found.get(key)
                    if row is None:
                        found[key] = ObservedRow(*key, count=1, first_at=event.at, last_at=event.at)
                        continue
                    row.count += 1
                    row.first_at = min(row.first_at, event.at)
                    row.last_at = max(row.last_at, event.at)
            if len(page) < PAGE:
                break
            after = page[-1].seq
    rows = sorted(found.values(), key=lambda r: (-r.count, r.tool, r.reason))
    return ObserveReport(rows=rows, observed_calls=observed, runs_scanned=len(run_ids))
