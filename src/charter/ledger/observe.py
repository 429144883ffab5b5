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
from charter.ledger.trust import LEDGER_DAMAGE, damage_reason

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
    runs_refused: list[dict[str, Any]]
    """Runs left out because their ledger is refused (damaged or quarantined): each one's
    ``run_id`` and ``reason``; one damaged run never stops the report."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "observed_calls": self.observed_calls,
            "runs_scanned": self.runs_scanned,
            "runs_refused": self.runs_refused,
            "would_deny": [r.to_dict() for r in self.rows],
        }


async def observe_report(
    run_ids: Sequence[str],
    events: Callable[[str, int, int], Awaitable[Sequence[Event]]],
    *,
    since: str | None = None,
    until: str | None = None,
    refused: Sequence[dict[str, Any]] = (),
) -> ObserveReport:
    """Count what enforce would have decided against observed calls, by tool and reason.

    ``events(run_id, after, limit)`` reads a run's events in order (the runtime's
    :meth:`~charter.runtime.Runtime.events`); ``refused`` names runs already known refused
    (``run_id``, ``reason``), reported with those found damaged while reading."""
    since = time_bound(since, "since")
    until = time_bound(until, "until")
    found: dict[tuple[str, str, str], ObservedRow] = {}
    observed = 0
    refused = list(refused)
    known = len(refused)
    for run_id in run_ids:
        try:
            seen = await _observed(run_id, events, since, until)
        except LEDGER_DAMAGE as exc:
            refused.append({"run_id": run_id, "reason": damage_reason(exc)})
            continue
        for at, key in seen:
            if key is None:  # the call itself
                observed += 1
                continue
            row = found.get(key)
            if row is None:
                found[key] = ObservedRow(*key, count=1, first_at=at, last_at=at)
                continue
            row.count += 1
            row.first_at = min(row.first_at, at)
            row.last_at = max(row.last_at, at)
    rows = sorted(found.values(), key=lambda r: (-r.count, r.tool, r.reason))
    return ObserveReport(
        rows=rows,
        observed_calls=observed,
        runs_scanned=len(run_ids) - (len(refused) - known),
        runs_refused=refused,
    )


async def _observed(
    run_id: str,
    events: Callable[[str, int, int], Awaitable[Sequence[Event]]],
    since: str | None,
    until: str | None,
) -> list[tuple[str, tuple[str, str, str] | None]]:
    """One run's observed calls in the range, read whole before any is counted (a run found
    damaged part way counts nothing): per call ``(at, None)``, then ``(at, (tool, phase,
    reason))`` per decision enforce would have taken."""
    seen: list[tuple[str, tuple[str, str, str] | None]] = []
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
            seen.append((event.at, None))
            for entry in (p.get("execution_audit") or {}).get("would") or []:
                key = (str(p.get("tool_id")), str(entry.get("phase")), str(entry.get("reason")))
                seen.append((event.at, key))
        if len(page) < PAGE:
            return seen
        after = page[-1].seq
