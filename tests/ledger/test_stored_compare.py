"""Verification compares stored projection rows as bytes; where bytes differ, as values."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.contracts.canonical import canonical_bytes
from charter.errors import InvalidInput
from charter.ledger.chain import LedgerKey
from charter.ledger.projections import task_key
from charter.ledger.verify import ChainChecker, same_json, verify_run
from charter.stores.memory import MemoryStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import record_sample_run
from tests.ledger.forge import rechain

pytestmark = pytest.mark.anyio
KEY = LedgerKey("test", b"k" * 32)


async def _edited_sqlite(tmp_path: Path, sql: str) -> SQLiteStore:
    path = tmp_path / "c.db"
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(sql)
    conn.close()
    return SQLiteStore(path, key=KEY, clock=FakeClock())


async def _verify(store: SQLiteStore) -> tuple[bool, str | None]:
    await store.start()
    try:
        report = await verify_run(store, "run-1", KEY)
    finally:
        await store.aclose()
    return report.ok, report.reason


@pytest.mark.parametrize(
    "sql",
    [
        # The same values in other bytes: spaces, 2.0 for 2, a key repeated.
        "UPDATE tasks SET data = replace(data, '\"attempts\":2', '\"attempts\" : 2.0') "
        "WHERE task_id = 'report'",
        'UPDATE runs SET data = \'{"status":"completed",\' || substr(data, 2)',
    ],
)
async def test_stored_bytes_that_differ_are_compared_as_values(tmp_path: Path, sql: str) -> None:
    assert await _verify(await _edited_sqlite(tmp_path, sql)) == (True, None)


async def test_a_row_stored_as_a_blob_is_read_as_its_bytes(tmp_path: Path) -> None:
    """The same JSON with another storage class (BLOB): the same value, so it verifies."""
    sql = "UPDATE tasks SET data = CAST(data AS BLOB) WHERE task_id = 'report'"
    assert await _verify(await _edited_sqlite(tmp_path, sql)) == (True, None)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE tasks SET data = 'not json' WHERE task_id = 'report'",
        "UPDATE tasks SET data = X'FF00' WHERE task_id = 'report'",  # not UTF-8 either
        "UPDATE runs SET data = 42",
    ],
)
async def test_a_row_that_is_not_json_text_diverges(tmp_path: Path, sql: str) -> None:
    assert await _verify(await _edited_sqlite(tmp_path, sql)) == (False, "SNAPSHOT_DIVERGENCE")


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM runs",
        "DELETE FROM tasks WHERE task_id = 'report'",
        "INSERT INTO artifacts SELECT run_id, 'another', seq, "
        "replace(data, 'actives-1', 'another'), row_seq, row_mac FROM artifacts",
        "UPDATE artifacts SET data = replace(data, '\"size\":', '\"size\":1')",
        "UPDATE runs SET data = '{\"zz\":0,' || substr(data, 2)",
    ],
)
async def test_stored_rows_missing_added_or_edited_diverge(tmp_path: Path, sql: str) -> None:
    assert await _verify(await _edited_sqlite(tmp_path, sql)) == (False, "SNAPSHOT_DIVERGENCE")


async def test_memory_store_rows_are_compared_as_stored() -> None:
    store = MemoryStore(key=KEY, clock=FakeClock())
    await record_sample_run(store, "run-1")
    assert (await verify_run(store, "run-1", KEY)).ok
    key = task_key("run-1", "report")
    store.rows[key] = json.dumps(json.loads(store.rows[key]), indent=1).encode()
    assert (await verify_run(store, "run-1", KEY)).ok  # same values, other bytes
    store.rows[key] = store.rows[key].replace(b'"attempts": 2', b'"attempts": 3')
    report = await verify_run(store, "run-1", KEY)
    assert (report.ok, report.reason) == (False, "SNAPSHOT_DIVERGENCE")


async def test_a_non_finite_float_is_never_settled_by_bytes() -> None:
    # orjson writes NaN as null, so a rebuilt NaN would encode like a stored null. A key
    # holder's event carrying NaN (json.loads reads it; orjson refuses) therefore sends the
    # rows to the value comparison, which refuses to canonicalize NaN as it always did.
    store = MemoryStore(key=KEY, clock=FakeClock())
    await record_sample_run(store, "run-1")
    rows = [store.events[("run-1", s)] for s in store.seqs["run-1"]]
    index = next(i for i, r in enumerate(rows) if b'"objective":"fetch actives"' in r.data)
    edited = rows[index].data.replace(b'"objective":"fetch actives"', b'"objective":NaN')
    rows[index] = dataclasses.replace(rows[index], data=edited)
    forged = rechain(rows, index)
    for row in forged:
        store.events[("run-1", row.seq)] = row
    last = forged[-1]
    store.heads["run-1"] = dataclasses.replace(
        store.heads["run-1"], hash=last.hash, mac=KEY.mac("run-1", last.seq, last.hash)
    )
    key = task_key("run-1", "retrieve")
    store.rows[key] = store.rows[key].replace(b'"objective":"fetch actives"', b'"objective":null')
    with pytest.raises(InvalidInput) as caught:
        await verify_run(store, "run-1", KEY)
    assert caught.value.reason == "ARGS_NON_FINITE_NUMBER"


async def test_compare_stored_agrees_with_compare_tables() -> None:
    store = MemoryStore(key=KEY, clock=FakeClock())
    await record_sample_run(store, "run-1")
    checker = ChainChecker("run-1")
    for seq in store.seqs["run-1"]:
        checker.feed(store.events[("run-1", seq)])
    stored = await store.stored_snapshot("run-1")
    parsed = await store.snapshot("run-1")
    assert stored is not None
    assert parsed is not None
    checker.compare_stored(stored.run, stored.tables)
    checker.compare_tables(parsed.run, parsed.tables)
    assert checker._encodes_to(  # the byte comparison decided every table
        checker.rebuild.listed("tasks", "run-1"), stored.tables["tasks"]
    )


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(stored=_values, rebuilt=_values)
def test_equal_bytes_are_always_equal_values(stored: object, rebuilt: object) -> None:
    # Whatever a stored row holds and whatever a rebuilt row is (the stored value itself,
    # with its tuples, integral floats and booleans, or another), the byte comparison says
    # "equal" only where the value comparison does.
    try:
        text = canonical_bytes(stored)
    except InvalidInput:
        return
    checker = ChainChecker("run-1")
    for row in (stored, rebuilt):
        if checker._encodes_to([row], [text]):  # type: ignore[list-item]
            assert same_json(json.loads(text), row)


@given(row=_values)
def test_rows_of_plain_json_values_compare_as_bytes(row: object) -> None:
    # The fast path is the common path: orjson writes what canonical_text wrote.
    if _plain(row):
        assert ChainChecker("run-1")._encodes_to([row], [canonical_bytes(row)])  # type: ignore[list-item]


def _plain(value: object) -> bool:
    """No floats, no tuples, integers in the canonical (safe) range, BMP-only keys."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return -(2**53) < value < 2**53
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(max(k, default="") <= "\uffff" and _plain(v) for k, v in value.items())
    return False
