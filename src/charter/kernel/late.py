"""Late results: an executor's answer that arrives after the call was made ``unknown``.

Restart reconciliation (:meth:`charter.kernel.operators.Operators.reconcile`) makes a call
``unknown`` when the process that dispatched it looks dead. If that process was only slow —
paused, cut off from the store — its executor's answer may still arrive. The call's state
does not change (an operator decides, with ``charter calls resolve``), but the answer is not
dropped either: it is recorded as a ``tool_progress`` event of stage ``late_result`` on the
call, holding the receipt the kernel would have written (already redacted and clamped), and
the call row keeps it under ``late_result`` for ``calls show`` and the console's attention
page. The audit trail gets a ``late_result`` record.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Any

from charter.errors import StoreError
from charter.kernel.answers import Answers
from charter.kernel.core import Attempt, KernelState
from charter.kernel.envelope import CallStatus, Envelope, Metrics
from charter.ledger.events import NewEvent

LATE_RESULT = "LATE_RESULT"


async def record_late_result(
    state: KernelState, answers: Answers, at: Attempt, receipt: dict[str, Any]
) -> Envelope:
    """Record ``receipt`` as a late result of ``at``'s call; answer with the call's state."""
    ctx, contract = at.ctx, at.bound()
    row = await state.call_row(ctx, at.call_id)
    current = str(row.state) if row is not None else CallStatus.UNKNOWN.value
    error = receipt.get("error") or {}
    audit = answers.audit_entry(
        at,
        "late_result",
        float(receipt.get("duration_ms") or 0.0),
        reason=error.get("reason"),
        code=error.get("code"),
        versioned=True,
    )
    entries = [
        NewEvent(
            type="tool_progress",
            payload={
                "stage": "late_result",
                "context_id": ctx.context_id,
                "call_id": at.call_id,
                "call_state": current,
                "receipt": receipt,
            },
        ),
        audit,
    ]
    with contextlib.suppress(StoreError):
        await state.store.append(ctx.run_id, entries)
    await answers.sink(ctx, audit)
    note = (
        f"{LATE_RESULT}: the executor answered {receipt.get('status')} after the call was made "
        f"{current}; the answer is kept on the call as evidence (charter calls show), the state "
        "is unchanged"
    )
    if row is None:
        return Envelope(
            call_id=at.call_id,
            status=CallStatus.UNKNOWN,
            warnings=(note,),
            metrics=Metrics(duration_ms=(time.perf_counter() - at.started) * 1000),
            trace=at.trace,
            context_id=ctx.context_id,
            run_id=ctx.run_id,
            tool=contract.id,
        )
    answer = answers.receipt(row, at, cached=False)
    return replace(answer, warnings=(*answer.warnings, note))
