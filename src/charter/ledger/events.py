"""Ledger events: the record, the known types, and the stored byte form.

An event is stored as the RFC 8785 canonical JSON of every field except ``hash``::

    {"at":…,"event_id":"00000001","payload":{…},"prev_hash":…,"run_id":…,
     "schema_version":1,"seq":1,"type":…}

and ``hash = "sha256:" + sha256(prev_hash_utf8 ‖ stored_bytes)``. Verification hashes the
stored bytes as they are and then checks that they agree with the indexed columns; nothing is
re-serialized to verify.

The registry of known event types lives here, in one place: later issues add their types (and
projection handlers in :mod:`charter.ledger.projections`) by editing these tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from charter.contracts.canonical import canonical_bytes, canonical_bytes_noting
from charter.ledger.slots import slot_setters

SCHEMA_VERSION = 1
GENESIS_HASH = "sha256:" + "0" * 64
"""The ``prev_hash`` of every run's first event."""

OBSERVATIONAL_TYPES: frozenset[str] = frozenset(
    {"tool_progress", "tool_call_recorded", "task_progress"}
)
"""Events that record what happened but never rewrite a snapshot (run, task, artifact rows)."""

TOOL_PROGRESS_STAGES: frozenset[str] = frozenset(
    {
        "started",
        "retrying",
        "result_accepted",
        "cache_hit",
        "completed",
        "failed",
        "cancelled",
        "unknown",
        "abandoned",
        "late_result",  # an executor's answer that arrived after the call was made unknown
        "message",  # a tool's redacted progress message (ctx.progress)
    }
)

EVENT_TYPES: frozenset[str] = frozenset(
    {
        "run_created",
        "run_status_changed",
        "task_created",
        "task_status_changed",
        "handoff_recorded",
        "artifact_registered",
        "context_resolved",
        *OBSERVATIONAL_TYPES,
        "run_metadata_expired",  # retention: a run's keyed fingerprints erased from its rows
        # approval_* (the approvals issue adds their projection handlers)
        "approval_requested",
        "approval_approved",
        "approval_rejected",
        "approval_expired",
        "approval_consumed",
        # proposal_*
        "proposal_created",
        "proposal_validated",
        "proposal_blocked",
        "proposal_approved",
        "proposal_rejected",
        "proposal_apply_started",
        "proposal_applied",
        "proposal_expired",
        # chat_*
        "chat_turn_started",
        "chat_message",
        "chat_tool_call",
        "chat_turn_completed",
        "chat_turn_failed",
        # what an application reported sending the model (charter.proof.disclosure)
        "disclosure_reported",
    }
)
"""Every event type this code knows. A ledger holding any other type fails verification."""


def event_id(seq: int) -> str:
    return f"{seq:08d}"


def format_at(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds: ``2025-01-02T03:04:05.000006Z``."""
    if moment.tzinfo is None:
        raise ValueError("event timestamps must be timezone-aware")
    # Not strftime: glibc's strftime re-reads the time zone (a stat call) every time.
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[: -len("+00:00")] + "Z"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """What a caller asks to append; the store assigns ``seq``, hashes and (by default) ``at``."""

    type: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    at: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One ledger event, as read back (after its stored bytes were checked)."""

    schema_version: int
    run_id: str
    seq: int
    event_id: str
    type: str
    at: str
    payload: Mapping[str, Any]
    prev_hash: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "seq": self.seq,
            "event_id": self.event_id,
            "type": self.type,
            "at": self.at,
            "payload": dict(self.payload),
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


_new = object.__new__
_EVENT = slot_setters(
    Event,
    ("schema_version", "run_id", "seq", "event_id", "type", "at", "payload", "prev_hash", "hash"),
)


def new_event(
    run_id: str, seq: int, type_: str, at: str, payload: Mapping[str, Any], prev: str, hash_: str
) -> Event:
    """The :class:`Event` of this schema version at ``seq``, built on the append path without
    the dataclass ``__init__`` (see :mod:`charter.ledger.slots`): the same frozen object."""
    s_version, s_run, s_seq, s_id, s_type, s_at, s_payload, s_prev, s_hash = _EVENT
    event: Event = _new(Event)
    s_version(event, SCHEMA_VERSION)
    s_run(event, run_id)
    s_seq(event, seq)
    s_id(event, f"{seq:08d}")  # event_id(seq)
    s_type(event, type_)
    s_at(event, at)
    s_payload(event, payload)
    s_prev(event, prev)
    s_hash(event, hash_)
    return event


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """One event row exactly as a store holds it: the indexed columns and the stored bytes."""

    run_id: str
    seq: int
    type: str
    at: str
    prev_hash: str
    hash: str
    data: bytes = field(repr=False)


def created_tenant(data: object) -> str | None:
    """The ``tenant`` a stored ``run_created`` event's bytes name, unchecked, or None (not
    that event, not JSON, no tenant): who may still see a run whose rows are not served."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, (bytes, str)):
        return None
    try:
        event = json.loads(data)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("type") != "run_created":
        return None
    payload = event.get("payload")
    tenant = payload.get("tenant") if isinstance(payload, dict) else None
    return tenant if isinstance(tenant, str) else None


_STORED = slot_setters(StoredEvent, ("run_id", "seq", "type", "at", "prev_hash", "hash", "data"))


def stored_event(event: Event, data: bytes) -> StoredEvent:
    """The row of ``event`` whose stored bytes are ``data``, built without the dataclass
    ``__init__`` (see :mod:`charter.ledger.slots`): the same frozen object."""
    s_run, s_seq, s_type, s_at, s_prev, s_hash, s_data = _STORED
    row: StoredEvent = _new(StoredEvent)
    s_run(row, event.run_id)
    s_seq(row, event.seq)
    s_type(row, event.type)
    s_at(row, event.at)
    s_prev(row, event.prev_hash)
    s_hash(row, event.hash)
    s_data(row, data)
    return row


_PLAIN = re.compile(r"[A-Za-z0-9_.:+-]*")


def _json_str(value: str) -> bytes:
    # Ids, types, timestamps and hashes are plain ASCII, whose canonical JSON form is the string
    # in quotes; anything else goes through json.dumps (RFC 8785 escapes match it for strings).
    if _PLAIN.fullmatch(value):
        return b'"' + value.encode("ascii") + b'"'
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def stored_bytes(
    *, run_id: str, seq: int, type: str, at: str, payload_bytes: bytes, prev_hash: str
) -> bytes:
    """Canonical JSON of the event without ``hash``, assembled around canonical payload bytes.

    Keys appear in RFC 8785 order (at, event_id, payload, prev_hash, run_id, schema_version,
    seq, type); a property test holds this equal to ``canonical_bytes`` of the whole dict.
    """
    if _PLAIN.fullmatch(f"{at}{prev_hash}{run_id}{type}"):
        return plain_stored_bytes(
            run_id=run_id,
            seq=seq,
            type=type,
            at=at,
            payload_bytes=payload_bytes,
            prev_hash=prev_hash,
        )
    return b"".join(
        (
            b'{"at":',
            _json_str(at),
            b',"event_id":"',
            event_id(seq).encode("ascii"),
            b'","payload":',
            payload_bytes,
            b',"prev_hash":',
            _json_str(prev_hash),
            b',"run_id":',
            _json_str(run_id),
            b',"schema_version":',
            str(SCHEMA_VERSION).encode("ascii"),
            b',"seq":',
            str(seq).encode("ascii"),
            b',"type":',
            _json_str(type),
            b"}",
        )
    )


def plain_stored_bytes(
    *, run_id: str, seq: int, type: str, at: str, payload_bytes: bytes, prev_hash: str
) -> bytes:
    """:func:`stored_bytes` for four strings known to match ``[A-Za-z0-9_.:+-]*``, written as
    they are. The append path has them: an identifier, a known event type, an RFC 3339 time
    and a ``sha256:`` digest (``plan_append`` checks the first three)."""
    return b"".join(
        (
            f'{{"at":"{at}","event_id":"{seq:08d}","payload":'.encode("ascii"),
            payload_bytes,
            f',"prev_hash":"{prev_hash}","run_id":"{run_id}","schema_version":'
            f'{SCHEMA_VERSION},"seq":{seq},"type":"{type}"}}'.encode("ascii"),
        )
    )


def payload_bytes(payload: Mapping[str, Any], proven: dict[int, Any] | None = None) -> bytes:
    """The canonical bytes of ``payload``; ``proven``: a batch's memo of nested values proven
    simple (:func:`~charter.contracts.canonical.canonical_bytes_noting`), which this payload's
    walk uses and adds to."""
    # a dict is encoded as it is (canonical_bytes copies nothing); another mapping as a dict
    value = payload if type(payload) is dict else dict(payload)
    if proven is None:
        return canonical_bytes(value)
    return canonical_bytes_noting(value, proven)


def expected_frame(row: StoredEvent) -> tuple[bytes, bytes]:
    """The exact prefix and suffix the stored bytes of ``row`` must have around the payload.

    Built from the columns as they are (no escaping): stored bytes match only when every column
    value appears literally, which our writer produces for its plain ASCII ids, types, times
    and hashes; anything else fails the comparison and is reported.
    """
    prefix = f'{{"at":"{row.at}","event_id":"{row.seq:08d}","payload":'
    suffix = (
        f',"prev_hash":"{row.prev_hash}","run_id":"{row.run_id}",'
        f'"schema_version":{SCHEMA_VERSION},"seq":{row.seq},"type":"{row.type}"}}'
    )
    return prefix.encode(), suffix.encode()


def decode(row: StoredEvent) -> Event:
    """Parse stored bytes into an :class:`Event` (no checks beyond JSON; see verify)."""
    doc = json.loads(row.data)
    return Event(
        schema_version=doc["schema_version"],
        run_id=doc["run_id"],
        seq=doc["seq"],
        event_id=doc["event_id"],
        type=doc["type"],
        at=doc["at"],
        payload=doc["payload"],
        prev_hash=doc["prev_hash"],
        hash=row.hash,
    )
