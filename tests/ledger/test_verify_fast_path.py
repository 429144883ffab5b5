"""The checker's fast path (only the payload parsed, the document built from the checked
columns) gives what the general path gives — the path every event took before — on plain
ledgers and on ledgers forged (by a key holder, so the chain and head verify) to hold bytes the
fast path must not take: escaped or control characters in ``at``, non-canonical payloads,
members after the payload that shadow the frame's, integers beyond 64 bits."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from charter.ledger import checker
from charter.ledger.chain import LedgerKey
from charter.ledger.events import StoredEvent
from charter.ledger.verify import (
    read_verified,
    take_verified,
    verify_rebuilt,
    verify_run,
    visit_verified,
)
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import record_sample_run
from tests.ledger.forge import rechain

pytestmark = pytest.mark.anyio
KEY = LedgerKey("test", b"k" * 32)
Mutation = Callable[[StoredEvent], StoredEvent]


def _data(row: StoredEvent, old: bytes, new: bytes) -> StoredEvent:
    assert old in row.data
    return dataclasses.replace(row, data=row.data.replace(old, new, 1))


def _at(text: str) -> Mutation:
    """``at`` (column and bytes) replaced by ``text`` written raw into the JSON."""

    def mutate(row: StoredEvent) -> StoredEvent:
        row = _data(row, f'"at":"{row.at}"'.encode(), f'"at":"{text}"'.encode())
        return dataclasses.replace(row, at=text)

    return mutate


def _replace(old: bytes, new: bytes) -> Mutation:
    return lambda row: _data(row, old, new)


# (index of the event in SAMPLE_RUN, mutation): 6 is task_status_changed (a projection
# handler applies it), 7 task_progress (none does), 9 artifact_registered.
CASES: dict[str, tuple[int, Mutation | None]] = {
    "as recorded": (0, None),
    "escaped at, handled": (6, _at("2026-01-01T00:00:00.000000\\u005a")),
    "escaped at, unhandled": (7, _at("2026-01-01T00:00:00.000000\\u005a")),
    "quote in at": (6, _at('2026-01-01T00:00:00.000000\\"Z')),
    "control character in at, handled": (6, _at("2026-01-01T00:00:00\x01Z")),
    "control character in at, unhandled": (7, _at("2026-01-01T00:00:00\x01Z")),
    "non-ASCII at": (6, _at("2026-01-01T00:00:00.000000Zé")),
    "spaced payload, handled": (6, _replace(b'"payload":{', b'"payload":{ ')),
    "spaced payload, unhandled": (7, _replace(b'"payload":{', b'"payload":{ ')),
    "member shadowing at, handled": (
        6,
        _replace(b',"prev_hash":', b',"at":"1999-01-01T00:00:00.000000Z","prev_hash":'),
    ),
    "member shadowing seq, unhandled": (7, _replace(b',"prev_hash":', b',"seq":99,"prev_hash":')),
    "member shadowing type, handled": (
        9,
        _replace(b',"prev_hash":', b',"type":"task_progress","prev_hash":'),
    ),
    "integer beyond 64 bits": (7, _replace(b'"percent":10', b'"percent":18446744073709551616')),
    "payload not JSON, unhandled": (7, _replace(b'"payload":{', b'"payload":{,')),
    "payload not an object, handled": (
        6,
        lambda row: dataclasses.replace(
            row,
            data=row.data[: row.data.index(b'"payload":') + 10]
            + b"[1]"
            + row.data[row.data.index(b',"prev_hash":') :],
        ),
    ),
}


async def _forged(path: Path, index: int, mutate: Mutation | None) -> None:
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
    if mutate is None:
        return
    conn = sqlite3.connect(path, isolation_level=None)
    cur = conn.execute("SELECT seq, type, at, prev_hash, hash, data FROM events ORDER BY seq")
    rows = [
        StoredEvent(run_id="run-1", seq=s, type=t, at=a, prev_hash=p, hash=h, data=bytes(d))
        for s, t, a, p, h, d in cur
    ]
    rows[index] = mutate(rows[index])
    forged = rechain(rows, index)
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


async def _outcome(store: SQLiteStore, call: Callable[[], Any]) -> Any:
    try:
        return ("ok", await call())
    except Exception as exc:  # the same error, or none, either way
        return ("raised", type(exc).__name__, str(exc))


async def _everything(store: SQLiteStore) -> list[Any]:
    seen: list[Any] = []
    taken: list[Any] = []
    out = [
        await _outcome(store, lambda: verify_run(store, "run-1", KEY)),
        await _outcome(store, lambda: read_verified(store, "run-1", KEY)),
        await _outcome(store, lambda: visit_verified(store, "run-1", KEY, seen.append)),
        await _outcome(store, lambda: take_verified(store, "run-1", KEY, _collect(taken))),
    ]
    rebuilt = await _outcome(store, lambda: verify_rebuilt(store, "run-1", KEY))
    if rebuilt[0] == "ok":  # the report, and the rows rebuilt as far as verification went
        rebuilt = (rebuilt[1][0], rebuilt[1][1].rows)
    # documents with their key order
    out += [rebuilt, [list(doc.items()) for doc in seen], taken]
    return out


def _collect(into: list[Any]) -> Callable[[Any, Any, Any], None]:
    return lambda typ, payload, seq: into.append((typ, payload, seq))


@pytest.mark.parametrize("case", list(CASES))
async def test_the_fast_path_gives_what_the_general_path_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    path = tmp_path / "c.db"
    await _forged(path, *CASES[case])
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        fast = await _everything(store)
        monkeypatch.setattr(checker, "_PLAIN_TYPES", False)  # every event: the general path
        general = await _everything(store)
    assert fast == general
    assert repr(fast) == repr(general)  # the same types too (1 == 1.0 == True)


async def test_documents_are_json_loads_of_the_stored_bytes(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    await _forged(path, 0, None)
    conn = sqlite3.connect(path)
    stored = [bytes(d) for (d,) in conn.execute("SELECT data FROM events ORDER BY seq")]
    conn.close()
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        got = await read_verified(store, "run-1", KEY)
    want = [json.loads(data) for data in stored]
    assert repr([list(doc.items()) for doc in got.events]) == repr(
        [list(doc.items()) for doc in want]
    )


def test_plain_strings_are_their_json_text() -> None:
    for text in ("2026-01-01T00:00:00.000000Z", "run-1", "é", ""):
        assert checker._plain(text)
        assert json.loads(f'"{text}"') == text
    for text in ('a"b', "a\\u0041", "a\x01", "a\x7f", "a\u2028"):
        assert not checker._plain(text)
