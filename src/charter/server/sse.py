"""A run's events as ``text/event-stream``: id = sequence number, resumable, kept alive.

The stream reads the ledger after the client's position (``Last-Event-ID`` or ``?after=``),
checks every event's chain link as it goes (a gap or a rewritten event ends the stream with
an ``error`` event rather than skipping), and then waits on the store's
``wait_for_events`` — which PostgreSQL wakes through ``LISTEN/NOTIFY``, so a client of one
replica sees events another replica appended. While nothing happens a ``: ping`` comment is
sent every ``keepalive_s`` seconds so proxies keep the connection open.

Each event is ``id: <seq>``, ``event: <type>``, ``data: <the event as JSON>``. Because ids
are sequence numbers and reading always starts strictly after the client's last id, a client
that reconnects with ``Last-Event-ID`` gets every later event exactly once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from charter.errors import InvalidInput, LedgerIntegrityError
from charter.ledger.lifecycle import RUN_TERMINAL
from charter.ledger.ports import EventLog
from charter.ledger.subscribe import read_events

RETRY_MS = 1000
_TERMINAL = frozenset(s.value for s in RUN_TERMINAL)


MAX_SEQ = 2**62


def parse_last_event_id(value: str | None) -> int | None:
    """The sequence number a ``Last-Event-ID`` names (``None`` when absent or empty).

    Anything else — not ASCII digits (``abc``, ``-5``, ``0x10``, a superscript ``²``) or
    beyond ``2**62`` — is ``422 REQUEST_INVALID``: resuming from 0 instead would send the
    client events it already has, and only ids this server sent are ever valid.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 19 or int(value) > MAX_SEQ:
        raise InvalidInput(
            f"the Last-Event-ID header must be an event sequence number (0 to {MAX_SEQ})",
            reason="REQUEST_INVALID",
        )
    return int(value)


async def event_stream(
    log: EventLog,
    run_id: str,
    *,
    after: int,
    keepalive_s: float = 15.0,
    batch: int = 500,
    ended: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[bytes]:
    """SSE frames for the run's events after ``after``, following until the run ends: its
    terminal status event is sent, or — a client resuming at or past it — ``ended`` says
    the run is over and nothing is left to send."""
    yield format_sse_event(comment="charter run events", retry=RETRY_MS)
    last = after
    last_hash: str | None = None
    while True:
        try:
            events = await read_events(log, run_id, after=last, after_hash=last_hash, limit=batch)
        except LedgerIntegrityError as exc:
            data = json.dumps({"reason": exc.reason, "seq": exc.seq, "message": exc.message})
            yield format_sse_event(event="error", data_str=data)
            return
        finished = False
        for event in events:
            last, last_hash = event.seq, event.hash
            yield format_sse_event(
                id=str(event.seq),
                event=event.type,
                data_str=json.dumps(event.to_dict(), separators=(",", ":"), ensure_ascii=False),
            )
            if event.type == "run_status_changed" and event.payload.get("status") in _TERMINAL:
                finished = True
        if finished:
            return
        if len(events) == batch:
            continue
        if not events and ended is not None and await ended():
            head = await log.head(run_id)
            if head is None or head.seq <= last:
                return
            continue  # the run's last events came in meanwhile: send them first
        if not await log.wait_for_events(run_id, after=last, timeout=keepalive_s):
            yield KEEPALIVE_COMMENT
