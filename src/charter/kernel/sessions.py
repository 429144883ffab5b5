"""Sessions: ad-hoc runs end when idle, and a long session's budgets renew.

CLI calls, MCP sessions and chat conversations work in *session runs* (workflow slugs
:data:`SESSION_SLUGS`) that nobody finishes explicitly. Two rules keep them honest:

* **Idle close** — a session run whose last event is older than ``session_idle_s`` (and that
  has no call in flight and waits for no approval) is ended ``completed``, or ``partial`` when
  one of its calls is left ``unknown`` (payload ``by: session``, ``reason: IDLE``).
  ``charter serve`` does this in its upkeep, every runtime when it opens.
* **Renewal** — budgets (the run's elapsed time and tool-call count) are per run. A session
  that resolves a new context in a run past either budget (or in a run that has ended) gets
  a fresh run for the same session — the old one ends with ``reason: BUDGET_RENEWED`` — unless
  ``renew_session_budgets`` is off, in which case the budgets bind the whole session (the
  calls are denied ``RUN_TIME_BUDGET_EXCEEDED`` / ``RUN_CALL_BUDGET_EXCEEDED``).

The end is appended at the run's head (``expected_seq``), so an event that arrives meanwhile
(a new call) keeps the run open; the ledger's in-flight guard refuses it while a call runs.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from charter.errors import InvalidInput, StoreConflict
from charter.kernel.core import KernelState, _parse_at
from charter.ledger.calls_projection import run_calls_key
from charter.ledger.events import NewEvent
from charter.ledger.trust import LEDGER_DAMAGE, skipped_damaged
from charter.ledger.views import CallRow, RunRow

logger = logging.getLogger("charter.kernel.sessions")
_ENDED = frozenset({"completed", "partial", "failed", "cancelled"})
SESSION_SLUGS = frozenset({"adhoc", "chat", "mcp-session"})
"""Workflow slugs of session runs: ``charter call`` / ``POST /v1/runs`` ad-hoc runs, chat
conversations and MCP sessions."""


class Sessions:
    def __init__(self, state: KernelState) -> None:
        self.state = state

    async def close_idle(self, *, limit: int = 1000) -> list[RunRow]:
        """End every session run idle for ``session_idle_s``; returns the runs ended."""
        state = self.state
        idle_s = state.settings.session_idle_s
        if idle_s is None:
            return []
        cutoff = state.now() - timedelta(seconds=idle_s)
        ended = []
        for run in await state.store.find_views(RunRow, status="running", limit=limit):
            if run.workflow_slug not in SESSION_SLUGS:
                continue
            try:
                status = await self._close_if_idle(run, cutoff)
            except LEDGER_DAMAGE as exc:  # refused and reported; the other runs go on
                skipped_damaged(logger, "idle close", run.run_id, exc)
                continue
            if status is not None:
                ended.append(run._replace(status=status))
        return ended

    async def _close_if_idle(self, run: RunRow, cutoff: datetime) -> str | None:
        store = self.state.store
        head = await store.head(run.run_id)
        if head is None:
            return None
        last = await store.read_stored(run.run_id, after=head.seq - 1, limit=1)
        if not last or _parse_at(last[0].at) > cutoff:
            return None
        return await self.end(run, "IDLE")

    async def needs_renewal(self, run: RunRow) -> bool:
        """Whether a session resolving a new context in ``run`` should get a fresh run."""
        state = self.state
        if run.status in _ENDED:
            return True
        if not state.settings.renew_session_budgets or run.workflow_slug not in SESSION_SLUGS:
            return False
        limit = state.settings.run_elapsed_budget_s
        if limit is not None:
            elapsed = (state.now() - _parse_at(run.created_at)).total_seconds()
            if elapsed > limit:
                return True
        budget = state.settings.run_call_budget
        if budget is not None:
            totals = await state.store.get_row(run_calls_key(run.run_id))
            if totals is not None and int(totals["total"]) >= budget:
                return True
        return False

    async def end(self, run: RunRow, reason: str) -> str | None:
        """End an open session run ``completed`` (``partial`` if a call is ``unknown``);
        None when it changed meanwhile (a new event, a call in flight, a status change)."""
        state, run_id = self.state, run.run_id
        head = await state.store.head(run_id)
        current = await state.store.read_view(RunRow, run_id)
        if head is None or current is None or current.status != "running":
            return None
        unknown = await state.store.find_views(CallRow, run_id=run_id, state="unknown", limit=1)
        status = "partial" if unknown else "completed"
        payload: dict[str, Any] = {"status": status, "by": "session", "reason": reason}
        if unknown:
            payload["gaps"] = ["a call's outcome is unknown"]
        try:
            await state.store.append(
                run_id,
                [NewEvent(type="run_status_changed", payload=payload)],
                expected_seq=head.seq + 1,
            )
        except (InvalidInput, StoreConflict):
            return None
        state.ended_runs.add(run_id)
        return status


def listing(runs: list[Any], *, everything: bool = False) -> list[Any]:
    """Runs for a listing: open runs first, then ended ones (each newest first, as given);
    session runs that ended ``completed`` or ``partial`` (idle-closed or renewed) are left out
    unless ``everything``."""
    shown = [
        r
        for r in runs
        if everything
        or not (
            r.get("workflow_slug") in SESSION_SLUGS and r.get("status") in ("completed", "partial")
        )
    ]
    return [r for r in shown if r.get("status") not in _ENDED] + [
        r for r in shown if r.get("status") in _ENDED
    ]
