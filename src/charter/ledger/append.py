"""The append path, as pure functions shared by every backend.

A backend appends inside one transaction: it reads the head row, fetches the projection rows
:func:`rows_needed` names, calls :func:`plan_append`, then writes the event rows, the projection
rows and the new head. Nothing here scans or counts a run: the next ``seq`` comes from the head.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from charter.errors import InvalidInput, StoreConflict
from charter.ledger import lifecycle
from charter.ledger.calls_projection import call_key
from charter.ledger.chain import Head, LedgerKey, chain_hash, new_head
from charter.ledger.events import (
    EVENT_TYPES,
    GENESIS_HASH,
    Event,
    NewEvent,
    StoredEvent,
    new_event,
    payload_bytes,
    plain_stored_bytes,
    stored_bytes,
    stored_event,
)
from charter.ledger.ids import check_identifier
from charter.ledger.projections import (
    HANDLERS,
    STATUS_EVENTS,
    Row,
    RowKey,
    Writes,
    reads_for,
    run_key,
)
from charter.ledger.slots import slot_setters

_AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_RUN_ENDED = frozenset(s.value for s in lifecycle.RUN_TERMINAL)


def _reserved_call(run_id: str, entry: NewEvent) -> RowKey | None:
    """The call row ``entry`` may reserve (an approval request, a dispatch start), if any."""
    p = entry.payload
    if entry.type == "tool_progress" and p.get("stage") != "started":
        return None
    if entry.type not in ("tool_progress", "approval_requested"):
        return None
    cid, call = p.get("context_id"), p.get("call_id")
    if not isinstance(cid, str) or not isinstance(call, str):
        return None
    return call_key(run_id, cid, call)


EventColumns = tuple[str, int, str, str, str, str, bytes]
"""An event row's columns: ``(run_id, seq, type, at, prev_hash, hash, data)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendPlan:
    """What one append writes: event rows, projection rows and the new head."""

    run_id: str
    events: tuple[Event, ...]
    data: tuple[bytes, ...]
    """The stored bytes of each of ``events``."""
    columns: tuple[EventColumns, ...]
    """Each event's row as a SQL store inserts it: ``(run_id, seq, type, at, prev_hash, hash,
    data)``, made while sealing (the values are at hand there; a store building them again
    pays a generator and seven attribute reads per event)."""
    writes: Writes
    seqs: dict[RowKey, int]
    """The sequence of the event that last wrote each row of ``writes``."""
    head: Head
    """The new head; its ``mac`` is empty when the append was planned with ``seal_head``
    false."""
    new_run: bool

    @property
    def rows(self) -> tuple[StoredEvent, ...]:
        """The event rows to write (built on demand: a backend may take the columns from
        ``events`` and ``data`` instead)."""
        return tuple(map(stored_event, self.events, self.data))


_VALID_RUN_IDS: dict[str, None] = {}
"""Run ids that passed ``check_identifier`` (a string that matched once always matches)."""
_VALID_RUN_IDS_MAX = 4096

_new = object.__new__
_PLAN = slot_setters(
    AppendPlan, ("run_id", "events", "data", "columns", "writes", "seqs", "head", "new_run")
)


def rows_needed(run_id: str, entries: Sequence[NewEvent]) -> tuple[RowKey, ...]:
    seen: dict[RowKey, None] = {}
    for entry in entries:
        for key in reads_for(run_id, entry.type, entry.payload):
            seen[key] = None
        if _reserved_call(run_id, entry) is not None:
            seen[run_key(run_id)] = None  # a new call may not start in an ended run
    return tuple(seen)


def guarded(entries: Sequence[NewEvent]) -> bool:
    """Whether :func:`check_in_flight` has anything to check in ``entries`` (a run or task
    status change): a store skips the coroutine otherwise."""
    for entry in entries:  # noqa: SIM110 - no generator per append
        if entry.type in STATUS_EVENTS:
            return True
    return False


async def check_in_flight(
    guard: lifecycle.InFlightCalls, run_id: str, entries: Sequence[NewEvent]
) -> None:
    """Refuse run or task status changes while one of their domain calls is in flight."""
    for entry in entries:
        scoped = STATUS_EVENTS.get(entry.type)
        if scoped is None or entry.payload.get("by") == "kernel":
            # The kernel's own running <-> input_required bookkeeping while approvals are
            # pending is not a domain transition.
            continue
        task_id = entry.payload.get("task_id") if scoped else None
        task = task_id if isinstance(task_id, str) else None
        calls = await guard.in_flight(run_id=run_id, task_id=task)
        lifecycle.ensure_nothing_in_flight(calls, run_id=run_id, task_id=task)


def plan_append(
    *,
    run_id: str,
    head: Head | None,
    entries: Sequence[NewEvent],
    rows: Mapping[RowKey, Row | None],
    now: str,
    key: LedgerKey,
    expected_seq: int | None = None,
    seal_head: bool = True,
    proven: dict[int, Any] | None = None,
) -> AppendPlan:
    """Seal ``entries`` onto the run whose current head is ``head``; raise if they may not go.

    ``seal_head`` false leaves the new head's ``mac`` empty, for a backend that writes only the
    last of several heads of a run and MACs that one before writing or trusting it.
    ``proven``: a batch's memo of nested payload values proven canonical-simple
    (:func:`~charter.contracts.canonical.canonical_bytes_noting`), for a backend that
    encodes the projection rows built from these payloads in the same batch.
    """
    if run_id not in _VALID_RUN_IDS:
        check_identifier(run_id, what="run_id")
        if len(_VALID_RUN_IDS) >= _VALID_RUN_IDS_MAX:
            _VALID_RUN_IDS.clear()
        _VALID_RUN_IDS[run_id] = None
    if not entries:
        raise InvalidInput("nothing to append", reason="EMPTY_APPEND", run_id=run_id)
    if head is None and entries[0].type != "run_created":
        raise InvalidInput(
            "the run does not exist; its first event must be run_created",
            reason="RUN_NOT_FOUND",
            run_id=run_id,
        )
    seq = head.seq if head else 0
    if expected_seq is not None and expected_seq != seq + 1:
        raise StoreConflict(
            f"sequence {expected_seq} is not the run's next one ({seq + 1})",
            reason="LEDGER_SEQ_CONFLICT",
            run_id=run_id,
            details={"expected_seq": expected_seq, "next_seq": seq + 1},
        )
    prev = head.hash if head else GENESIS_HASH
    plain_prev = _DIGEST.fullmatch(prev) is not None
    view: dict[RowKey, Row | None] = dict(rows)
    writes: Writes = {}
    seqs: dict[RowKey, int] = {}
    stored: list[bytes] = []
    events: list[Event] = []
    columns: list[EventColumns] = []
    for entry in entries:
        type_, payload = entry.type, entry.payload
        if type_ not in EVENT_TYPES:
            raise InvalidInput("unknown event type", reason="UNKNOWN_EVENT_TYPE", run_id=run_id)
        if type_ == "run_created" and seq != 0:
            raise StoreConflict("the run already exists", reason="RUN_EXISTS", run_id=run_id)
        at = entry.at
        if not at:
            at = now  # the store's clock, already in the stored form
        elif not _AT.fullmatch(at):
            raise InvalidInput("event time must be RFC 3339 UTC", reason="INVALID_TIMESTAMP")
        if type(payload) is not dict and not isinstance(payload, Mapping):  # dict: no ABC check
            raise InvalidInput("event payload must be an object", reason="EVENT_PAYLOAD_INVALID")
        seq += 1
        # run_id passed check_identifier and the type is a known one; prev is a digest (the
        # head's was checked above, the others are this loop's); ``at`` is the store's clock
        # or matched _AT, whose \d also takes non-ASCII digits: plain when ASCII. Such
        # strings are written as they are (see plain_stored_bytes).
        data = (plain_stored_bytes if plain_prev and at.isascii() else stored_bytes)(
            run_id=run_id,
            seq=seq,
            type=type_,
            at=at,
            payload_bytes=payload_bytes(payload, proven),
            prev_hash=prev,
        )
        digest = chain_hash(prev, data)
        event = new_event(run_id, seq, type_, at, payload, prev, digest)
        reserving = _reserved_call(run_id, entry)
        if reserving is not None and view.get(reserving) is None:
            run = view.get(run_key(run_id))
            if run is not None and run.get("status") in _RUN_ENDED:
                # Checked here, in the append's transaction, so that no call is reserved in
                # a run that ended after the kernel looked (the kernel reads it only on a
                # retry, after this conflict).
                raise StoreConflict(
                    "the run has ended; nothing more runs in it", reason="RUN_ENDED", run_id=run_id
                )
        handler = HANDLERS.get(type_)
        if handler is not None:
            try:
                out = handler.apply(event, view.get)
            except InvalidInput as exc:
                exc.run_id = run_id
                raise
            view.update(out)
            writes.update(out)
            seqs.update(dict.fromkeys(out, seq))
        stored.append(data)
        events.append(event)
        columns.append((run_id, seq, type_, at, prev, digest, data))
        prev = digest
    mac = key.mac(run_id, seq, prev) if seal_head else ""
    s_run, s_events, s_data, s_columns, s_writes, s_seqs, s_head, s_new = _PLAN
    plan: AppendPlan = _new(AppendPlan)  # AppendPlan(...) without its __init__ (ledger.slots)
    s_run(plan, run_id)
    s_events(plan, tuple(events))
    s_data(plan, tuple(stored))
    s_columns(plan, tuple(columns))
    s_writes(plan, writes)
    s_seqs(plan, seqs)
    s_head(plan, new_head(run_id, seq, prev, mac))
    s_new(plan, head is None)
    return plan
