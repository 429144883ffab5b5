"""Incremental reads: follow a run's events after a sequence number, checking continuity.

A subscriber remembers the last ``(seq, hash)`` it saw; every new event must carry the next
sequence number, link to that hash, and hash correctly, or the subscription fails with a
:class:`~charter.errors.LedgerIntegrityError` naming the reason and sequence number.
Starting after a sequence number the run has not reached yet is not damage: there is nothing
to read (a follower waits until the run gets there, then continues from that event's hash).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from charter.errors import InvalidInput, LedgerIntegrityError
from charter.ledger.events import GENESIS_HASH, Event, decode
from charter.ledger.lifecycle import RUN_TERMINAL
from charter.ledger.ports import EventLog
from charter.ledger.verify import LedgerProblem, check_row
from charter.ledger.views import RunRow

_TERMINAL = frozenset(s.value for s in RUN_TERMINAL)


async def run_has_ended(store: Any, run_id: str) -> bool:
    """Whether the run's row says it has ended (a follower then stops once it has read
    everything: no event will come)."""
    run = await store.read_view(RunRow, run_id)
    return run is not None and run.status in _TERMINAL


async def read_events(
    log: EventLog, run_id: str, *, after: int = 0, after_hash: str | None = None, limit: int = 1000
) -> list[Event]:
    """Up to ``limit`` checked events after ``after`` (continuity checked from ``after_hash``)."""
    _cursor(after)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(
            f"limit must be a positive integer, not {limit!r:.40}", reason="LIMIT_INVALID"
        )
    out: list[Event] = []
    async for event in subscribe(log, run_id, after=after, after_hash=after_hash, follow=False):
        out.append(event)
        if len(out) >= limit:
            break
    return out


def _cursor(after: object) -> None:
    """``after`` is a sequence number (0: from the start): a negative or non-integer one is
    the caller's mistake, not a gap in the ledger (it read as ``LEDGER_GAP``)."""
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise InvalidInput(
            f"after must be an event sequence number (0 or more), not {after!r:.40}",
            reason="CURSOR_INVALID",
        )


async def _anchor(log: EventLog, run_id: str, after: int) -> str | None:
    """The stored hash of event ``after`` to continue from, or None while the run's head is
    below ``after`` (a position the run has not reached is no gap: there is nothing to read
    yet, as in JSON mode). At or below the head the event must exist: a missing one is damage
    (``LEDGER_GAP``). The head is read first, so an append in between cannot look like a gap."""
    head = await log.head(run_id)
    if head is not None and head.seq < after:
        return None
    known = await log.read_stored(run_id, after=after - 1, limit=1)
    if not known or known[0].seq != after:
        raise LedgerIntegrityError(
            f"event {after} is missing", reason="LEDGER_GAP", seq=after, run_id=run_id
        )
    return known[0].hash


async def subscribe(
    log: EventLog,
    run_id: str,
    *,
    after: int = 0,
    after_hash: str | None = None,
    follow: bool = True,
    poll_s: float = 1.0,
    ended: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[Event]:
    """Yield the run's events with ``seq > after``; with ``follow``, wait for new ones — until
    ``ended`` (when given) says the run is over and everything has been read (a follower
    that starts at or past the head of an ended run stops instead of waiting forever)."""
    _cursor(after)
    last_seq = after
    last_hash = after_hash
    if last_hash is None and after == 0:
        last_hash = GENESIS_HASH
    while last_hash is None:
        last_hash = await _anchor(log, run_id, after)
        if last_hash is None:  # the run has not reached ``after`` yet: not damage, just early
            if not follow or (ended is not None and await _over(log, run_id, after, ended)):
                return
            await log.wait_for_events(run_id, after=after - 1, timeout=poll_s)
    while True:
        rows = await log.read_stored(run_id, after=last_seq, limit=500)
        for row in rows:
            try:
                check_row(row, last_seq=last_seq, last_hash=last_hash)
            except LedgerProblem as problem:
                raise LedgerIntegrityError(
                    problem.message, reason=problem.reason, seq=problem.seq, run_id=run_id
                ) from None
            last_seq, last_hash = row.seq, row.hash
            yield decode(row)
        if rows:
            continue
        if not follow or (ended is not None and await _over(log, run_id, last_seq, ended)):
            return
        await log.wait_for_events(run_id, after=last_seq, timeout=poll_s)


async def _over(
    log: EventLog, run_id: str, read: int, ended: Callable[[], Awaitable[bool]]
) -> bool:
    """The run has ended and holds nothing after ``read`` (its head read after the status, so
    a last event appended in between is still read)."""
    if not await ended():
        return False
    head = await log.head(run_id)
    return head is None or head.seq <= read
