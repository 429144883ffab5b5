"""A careless stdio client sends two requests with the same id while the first is in flight.

JSON-RPC ids must be unique among a client's requests in flight, or the answers cannot be
told apart. ``charter mcp`` answers the second with an invalid-request error
(``REQUEST_ID_IN_USE``) and never runs its tool; the first completes as usual, and once it is
answered (or the client cancelled it) the id may be used again. Raw lines to a real
``charter mcp`` process (the SDK's client cannot send a duplicate).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_careless_client import with_slow_tool
from tests.cli.test_first_hour import charter
from tests.mcp.test_wire_garbage import INIT, Wire, call

pytestmark = pytest.mark.slow


def _events(demo: Path) -> str:
    runs = json.loads(charter("runs", "ls", "--json", cwd=demo).stdout or "[]")
    return "".join(charter("runs", "events", r["run_id"], cwd=demo).stdout for r in runs)


def _started(demo: Path, call_id: str) -> None:
    deadline = time.monotonic() + 60
    while f"stage=started call_id={call_id}" not in _events(demo):
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.3)


def _pair(wire: Wire, demo: Path, ident: Any) -> None:
    """A slow call under ``ident``, then (while it runs) a quick one under the same id."""
    key = f"slow-{ident}"
    wire.send(call(0, {"seconds": 3, "idempotency_key": key}, name="slow_wait") | {"id": ident})
    _started(demo, key)
    second = call(0, {"query": "", "idempotency_key": f"dup-{ident}"}) | {"id": ident}
    wire.send(second)
    refused = wire.receive()
    assert refused["id"] == ident, refused
    assert refused["error"]["code"] == -32600, refused
    assert refused["error"]["data"]["reason"] == "REQUEST_ID_IN_USE", refused
    assert "in flight" in refused["error"]["message"], refused
    done = wire.receive(timeout=60)
    assert done["id"] == ident, done
    assert done["result"]["isError"] is False, done
    assert done["result"]["_meta"]["charter/call_id"] == key, done
    # answered: the id is free again, and a request under it is served
    wire.send(call(0, {"query": "", "idempotency_key": f"again-{ident}"}) | {"id": ident})
    again = wire.receive()
    assert again["id"] == ident, again
    assert again["result"]["isError"] is False, again


def test_a_second_request_under_an_id_in_flight_is_refused_and_never_run(
    tmp_path: Path,
) -> None:
    made = charter("init", "demo", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    demo = tmp_path / "demo"
    with_slow_tool(demo)
    wire = Wire(demo)
    try:
        wire.send(INIT)
        assert "result" in wire.receive()
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for ident in (1, "req-a"):
            _pair(wire, demo, ident)
        # a request the client cancels is never answered: its id is free again at once
        slow = call(0, {"seconds": 3, "idempotency_key": "slow-5"}, name="slow_wait")
        wire.send(slow | {"id": 5})
        _started(demo, "slow-5")
        cancel = {"requestId": 5, "reason": "changed my mind"}
        wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        wire.send(call(0, {"query": "", "idempotency_key": "after-5"}) | {"id": 5})
        reused = wire.receive()
        assert reused["id"] == 5, reused
        assert reused["result"]["_meta"]["charter/call_id"] == "after-5", reused
        # "1" and 1 are two ids: both in flight at once is no duplicate
        wire.send(call(0, {"seconds": 1, "idempotency_key": "s-int"}, name="slow_wait") | {"id": 9})
        wire.send(call(0, {"query": "", "idempotency_key": "s-str"}) | {"id": "9"})
        answers = {json.dumps(m["id"]): m for m in (wire.receive(), wire.receive(timeout=60))}
        assert set(answers) == {"9", '"9"'}, answers
        assert all(a["result"]["isError"] is False for a in answers.values()), answers
        code, err = wire.close()
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()
            wire.proc.wait()
    assert code == 0, err
    assert "Traceback" not in err
    events = _events(demo)
    for ident in (1, "req-a"):
        assert f"call_id=slow-{ident}" in events
        assert f"call_id=again-{ident}" in events
        assert f"dup-{ident}" not in events  # the refused request's tool never ran
