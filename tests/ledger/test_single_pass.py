"""One read verifies a run and yields its parsed events; the fast paths match the slow ones."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.contracts.canonical import canonical_bytes
from charter.errors import LedgerIntegrityError
from charter.ledger.chain import LedgerKey
from charter.ledger.events import StoredEvent
from charter.ledger.jsonload import loads
from charter.ledger.verify import read_verified, same_json, verify_run
from charter.proof.replay import read_events
from charter.stores.memory import MemoryStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import SAMPLE_RUN, record_sample_run
from tests.ledger.forge import rechain

pytestmark = pytest.mark.anyio
KEY = LedgerKey("test", b"k" * 32)


@pytest.mark.parametrize(
    "text",
    [
        b'{"a":1,"b":[true,false,null],"c":"\\u00e9\\n","d":1.5}',
        b'{"big":18446744073709551616,"neg":-9223372036854775809}',  # orjson: floats
        b'{"big":100000000000000000000}',  # canonical JSON of the float 1e20
        b'{"a":NaN,"b":Infinity}',
        b'{"s":"\\ud800"}',  # a lone surrogate
        b'{"a":1,"a":2}',
        b'{ "a" : 1.0 }',
        b"[1e400]",
    ],
)
def test_loads_is_json_loads(text: bytes) -> None:
    got, want = loads(text), json.loads(text)
    assert repr(got) == repr(want)
    assert type(got) is type(want)


@pytest.mark.parametrize("text", [b"{", b'{"a":}', b"\xff", b""])
def test_loads_refuses_what_json_loads_refuses(text: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_json, _json)
def test_same_json_is_canonical_equality(a: object, b: object) -> None:
    assert same_json(a, b) == (canonical_bytes(a) == canonical_bytes(b))
    assert same_json(a, a)


def test_same_json_tells_booleans_from_numbers() -> None:
    assert not same_json({"n": 1}, {"n": True})
    assert not same_json([0], [False])
    assert same_json({"n": 1}, {"n": 1.0})
    assert same_json([1, [2]], ((1, (2,))))


async def test_read_verified_returns_what_read_events_parses(tmp_path: Path) -> None:
    async with SQLiteStore.open(tmp_path / "c.db", key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
        got = await read_verified(store, "run-1", KEY)
        assert got.report.ok
        assert got.report.events == len(SAMPLE_RUN)
        assert list(got.events) == await read_events(store, "run-1")
        assert await verify_run(store, "run-1", KEY) == got.report


async def test_read_verified_on_the_memory_store() -> None:
    store = MemoryStore(key=KEY, clock=FakeClock())
    await record_sample_run(store, "run-1")
    got = await read_verified(store, "run-1", KEY)
    assert got.report.ok
    assert list(got.events) == await read_events(store, "run-1")


async def test_read_verified_reports_a_tampered_ledger(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DELETE FROM events WHERE seq = 5")
    conn.close()
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        got = await read_verified(store, "run-1", KEY)
        assert (got.report.ok, got.report.reason, got.report.seq) == (False, "LEDGER_GAP", 5)
        assert got.report == await verify_run(store, "run-1", KEY)
        assert [e["seq"] for e in got.events] == [1, 2, 3, 4]


async def test_a_projection_edited_to_a_boolean_diverges(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "UPDATE tasks SET data = replace(data, '\"attempts\":1', '\"attempts\":true') "
        "WHERE task_id = 'retrieve'"
    )
    conn.close()
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        report = await verify_run(store, "run-1", KEY)
        assert (report.ok, report.reason) == (False, "SNAPSHOT_DIVERGENCE")


async def test_an_event_that_is_not_json_stops_a_verified_read(tmp_path: Path) -> None:
    # Verification parses only events with a projection handler; a key holder's ledger whose
    # task_progress bytes are not JSON verifies, but its events cannot be handed on.
    path = tmp_path / "c.db"
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
    conn = sqlite3.connect(path, isolation_level=None)
    cur = conn.execute("SELECT seq, type, at, prev_hash, hash, data FROM events ORDER BY seq")
    rows = [
        StoredEvent(run_id="run-1", seq=s, type=t, at=a, prev_hash=p, hash=h, data=bytes(d))
        for s, t, a, p, h, d in cur
    ]
    assert rows[7].type == "task_progress"
    start = rows[7].data.index(b'"payload":') + len(b'"payload":')
    rows[7] = dataclasses.replace(
        rows[7], data=rows[7].data[:start] + b"{oops" + rows[7].data[start + 1 :]
    )
    forged = rechain(rows, 7)
    conn.execute("BEGIN")
    conn.execute("DELETE FROM events")
    conn.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(r.run_id, r.seq, r.type, r.at, r.prev_hash, r.hash, r.data) for r in forged],
    )
    last = forged[-1]
    conn.execute(
        "UPDATE run_heads SET hash = ?, mac = ?", (last.hash, KEY.mac("run-1", last.seq, last.hash))
    )
    conn.execute("COMMIT")
    conn.close()
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        assert (await verify_run(store, "run-1", KEY)).ok
        with pytest.raises(LedgerIntegrityError) as caught:
            await read_verified(store, "run-1", KEY)
        assert (caught.value.reason, caught.value.seq) == ("LEDGER_HASH_MISMATCH", 8)
