"""The client's reading of the runs SSE stream: an ``error`` frame is the stream's failure
whether or not it carries an id. SSE carries the last event id over to a frame that names
none, so the server's error frame after some events arrived with that id and was returned by
``Client.stream_events`` as if it were a ledger event (the chat client had the same fault)."""

from __future__ import annotations

import json

import httpx2
import pytest

from charter.client._common import sse_event
from charter.errors import LedgerIntegrityError

DAMAGE = json.dumps({"reason": "LEDGER_GAP", "seq": 6, "message": "event 6 is missing"})


@pytest.mark.parametrize("carried_id", ["", "5"])
def test_an_error_frame_raises_with_or_without_an_id(carried_id: str) -> None:
    frame = httpx2.ServerSentEvent(event="error", data=DAMAGE, id=carried_id)
    with pytest.raises(LedgerIntegrityError) as caught:
        sse_event(frame)
    assert (caught.value.reason, caught.value.seq) == ("LEDGER_GAP", 6)
    assert "event 6 is missing" in str(caught.value)


def test_events_and_pings_read_as_before() -> None:
    event = {"seq": 5, "type": "run_status_changed", "payload": {"status": "running"}}
    assert sse_event(httpx2.ServerSentEvent(data=json.dumps(event), id="5")) == event
    assert sse_event(httpx2.ServerSentEvent(event="ping", data="", id="5")) is None
    assert sse_event(httpx2.ServerSentEvent(data="", id="")) is None
