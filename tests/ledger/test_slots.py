"""The append path's fast constructors make the same frozen objects as the dataclasses'."""

from __future__ import annotations

import dataclasses

import pytest

from charter.ledger.chain import Head, new_head
from charter.ledger.events import SCHEMA_VERSION, Event, StoredEvent, new_event, stored_event
from charter.ledger.slots import slot_setters


def test_new_event_is_the_dataclass_event() -> None:
    payload = {"stage": "started"}
    fast = new_event("run-1", 7, "tool_progress", "2025-01-02T03:04:05.000006Z", payload, "p", "h")
    slow = Event(
        schema_version=SCHEMA_VERSION,
        run_id="run-1",
        seq=7,
        event_id="00000007",
        type="tool_progress",
        at="2025-01-02T03:04:05.000006Z",
        payload=payload,
        prev_hash="p",
        hash="h",
    )
    assert type(fast) is Event
    assert fast == slow
    assert fast.to_dict() == slow.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.seq = 8  # type: ignore[misc]


def test_stored_event_is_the_dataclass_row() -> None:
    event = new_event("run-1", 2, "run_created", "2025-01-02T03:04:05.000006Z", {}, "p", "h")
    fast = stored_event(event, b"{}")
    assert type(fast) is StoredEvent
    assert fast == StoredEvent(
        run_id="run-1",
        seq=2,
        type="run_created",
        at="2025-01-02T03:04:05.000006Z",
        prev_hash="p",
        hash="h",
        data=b"{}",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.data = b""  # type: ignore[misc]


def test_new_head_is_the_dataclass_head() -> None:
    fast = new_head("run-1", 3, "sha256:ab", "hmac-sha256:k:cd")
    assert type(fast) is Head
    assert fast == Head(run_id="run-1", seq=3, hash="sha256:ab", mac="hmac-sha256:k:cd")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.mac = ""  # type: ignore[misc]


def test_slot_setters_refuse_a_field_list_that_is_not_the_class_fields() -> None:
    with pytest.raises(TypeError, match="fields are"):
        slot_setters(Head, ("run_id", "seq", "hash"))


def test_plan_columns_are_the_event_rows() -> None:
    """``AppendPlan.columns`` (what the SQLite writer inserts) holds each sealed event's own
    columns and stored bytes, in order: a column out of place would store a row whose hash
    does not chain."""
    from charter.ledger.append import plan_append
    from charter.ledger.chain import LedgerKey
    from charter.ledger.events import NewEvent

    key = LedgerKey("k1", b"0123456789abcdef")
    created = plan_append(
        run_id="run-1",
        head=new_head("run-1", 4, "sha256:" + "0" * 64, ""),
        entries=[
            NewEvent(type="tool_progress", payload={"stage": "message", "note": "a"}),
            NewEvent(type="tool_progress", payload={"stage": "message", "note": "é\U0001f600"}),
        ],
        rows={},
        now="2025-01-02T03:04:05.000006Z",
        key=key,
    )
    assert created.columns == tuple(
        (e.run_id, e.seq, e.type, e.at, e.prev_hash, e.hash, d)
        for e, d in zip(created.events, created.data, strict=True)
    )
    assert [c[1] for c in created.columns] == [5, 6]
    assert created.columns[1][4] == created.columns[0][5]  # the chain: prev_hash = hash before
