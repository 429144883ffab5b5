"""The in-flight guard the ledger asks before a run or task changes status.

A run or task may not change status while one of its domain tool calls is ``dispatching``
(the ChemSpace seed's rule: lifecycle transitions wait until each invocation reaches a
durable terminal stage). The kernel's call table answers the question. The kernel's own
``running ⇄ input_required`` bookkeeping for approvals is exempt (``by: kernel``). A
delegating call (``delegates_execution``) is not watched: the calls it makes are, one by one
(:mod:`charter.kernel.delegation`).
"""

from __future__ import annotations

from collections.abc import Sequence

from charter.kernel.delegation import delegates
from charter.kernel.store import KernelStore
from charter.ledger.views import CallRow


class CallsInFlight:
    """Implements :class:`charter.ledger.lifecycle.InFlightCalls` over the calls projection."""

    def __init__(self) -> None:
        self.store: KernelStore | None = None

    async def in_flight(self, *, run_id: str, task_id: str | None) -> Sequence[str]:
        if self.store is None:
            return ()
        rows = await self.store.find_views(
            CallRow, run_id=run_id, state="dispatching", limit=10_000
        )
        return [
            r.call_id
            for r in rows
            if (task_id is None or r.task_id == task_id) and not delegates(r)
        ]
