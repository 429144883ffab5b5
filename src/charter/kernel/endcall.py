"""How a call that cannot go on the ordinary way ends: a context that takes no new call (expired,
or of another Build), and a call that was cancelled or raised (see :mod:`charter.kernel.flight`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

import anyio

from charter.contracts.intake import fingerprint_arguments
from charter.errors import Failure, InternalFailure, InvalidInput, StoreError
from charter.kernel import flight
from charter.kernel.answers import Answers
from charter.kernel.core import Arrival, Attempt, KernelState
from charter.kernel.envelope import TERMINAL_STATES, CallStatus, Envelope
from charter.ledger.events import NewEvent


async def closed_context(
    state: KernelState,
    answers: Answers,
    at: Attempt,
    arguments: str | bytes | Mapping[str, Any],
    refusal: Failure,
) -> Envelope:
    """A context that takes no new call: a finished call's receipt when the tool and the
    arguments' fingerprint match the recorded call, ``conflict`` when they do not, else
    the refusal."""
    row = await state.call_row(at.ctx, at.call_id)
    if row is None or row.state not in TERMINAL_STATES:
        return await answers.refuse(at, refusal, CallStatus.DENIED)
    offered = at.ctx.offered(at.tool)
    try:
        at.fingerprint = fingerprint_arguments(arguments, state.fingerprinter)
    except InvalidInput:
        at.fingerprint = None
    if offered is None or offered.id != row.tool_id or at.fingerprint != row.fingerprint:
        return await answers.conflict(
            at, tool_id=offered.id if offered is not None else "(undisclosed)"
        )
    return await answers.cached(row, at)


async def cancelled(
    state: KernelState, answers: Answers, arrival: Arrival, error: BaseException
) -> None:
    """Record how far a cancelled call got, shielded from the cancellation, and hand its
    answer to whoever catches the cancellation (:func:`recorded_answer`): a server that is
    stopping can still tell its client what became of the call."""
    with anyio.CancelScope(shield=True):
        envelope = await asyncio.shield(interrupted(state, answers, arrival, None))
    error.charter_envelope = envelope  # type: ignore[attr-defined]


def recorded_answer(error: BaseException) -> Envelope | None:
    """The answer :meth:`~charter.kernel.kernel.Kernel.call` recorded for a call before giving
    its caller back ``error``, the cancellation; None for any other error."""
    found = getattr(error, "charter_envelope", None)
    return found if isinstance(found, Envelope) else None


async def interrupted(
    state: KernelState, answers: Answers, arrival: Arrival, error: Failure | None
) -> Envelope:
    """End a call that raised (``error``) or was cancelled (``error`` None) honestly:
    audited, and terminal in the store when its intent was committed (see
    :mod:`charter.kernel.flight`)."""
    current = arrival.flight
    cancelled = error is None
    failure = error or InternalFailure("the call was cancelled", reason="CALL_CANCELLED")
    await current.settled()
    at: Attempt | None = current.attempt
    if at is None:
        return answers.answer(arrival, CallStatus.FAILED, failure, tool=arrival.tool)
    recorded = current.recorded
    if isinstance(recorded, Envelope):
        return recorded  # the executor answered and its outcome is in the ledger
    status = CallStatus.CANCELLED if cancelled else CallStatus.FAILED
    if not current.reserved or at.contract is None:
        try:
            return await answers.refuse(at, failure, status)
        except Failure:  # the run cannot take the audit record (refused, store down)
            return answers.answer(at, status, failure, tool=arrival.tool, ctx=at.ctx)
    try:
        row = await state.call_row(at.ctx, at.call_id)
    except Failure:
        return answers.answer(at, CallStatus.UNKNOWN, failure, tool=arrival.tool, ctx=at.ctx)
    if row is not None and row.state == "dispatching":
        if current.phase == flight.INTENT:  # the executor was never asked
            stage = "cancelled" if cancelled else "failed"
        else:
            stage = "unknown"
        await _record_end(state, answers, at, stage, failure)
        row = await state.call_row(at.ctx, at.call_id)
    if row is None:
        return answers.answer(at, CallStatus.UNKNOWN, failure, tool=at.contract.id)
    return answers.receipt(row, at, cached=False)


async def _record_end(
    state: KernelState, answers: Answers, at: Attempt, stage: str, error: Failure
) -> None:
    """Record a terminal ``stage`` for a call this process reserved (and its audit)."""
    err = answers.safe_error(error)
    assert err is not None
    status = {"cancelled": "cancelled", "failed": "failed"}.get(stage, "unknown")
    duration_ms = (time.perf_counter() - at.started) * 1000
    receipt: dict[str, Any] = {
        "status": status,
        "data": None,
        "error": err,
        "warnings": [],
        "artifact_ids": [],
        "output_bytes": 0,
        "attempts": 1 if stage == "unknown" else 0,
        "duration_ms": round(duration_ms, 3),
    }
    audit = answers.audit_entry(
        at, status, duration_ms, reason=err["reason"], code=err["code"], versioned=True
    )
    progress = NewEvent(
        type="tool_progress",
        payload={
            "stage": stage,
            "context_id": at.ctx.context_id,
            "call_id": at.call_id,
            "receipt": receipt,
            "reason": err["reason"],
        },
    )
    try:
        await state.store.append(at.ctx.run_id, [progress, audit])
    except (InvalidInput, StoreError):
        # Recorded by someone else meanwhile, or the store is failing: a lapsed lease
        # (or the next start) reconciles a call still dispatching.
        return
    with contextlib.suppress(Exception):
        await answers.sink(at.ctx, audit)
