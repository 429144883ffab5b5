"""The SQLite store reads stored projection rows unordered and sorts them itself
(:func:`charter.stores.sqlite_listing.stored_rows`): the order must be SQLite's ``ORDER BY``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.ledger.projections import TABLES
from charter.stores._sql import list_sql
from charter.stores.sqlite_listing import stored_rows, text_bytes
from tests.ledger.test_stored_compare import _edited_sqlite, _verify

pytestmark = pytest.mark.anyio

_CALLS = TABLES["calls"]
# What a damaged listing column may hold: numbers of both kinds, text (also non-ASCII and
# not UTF-8), NULL and BLOBs; SQLite orders them across storage classes, Python refuses to.
_cell = (
    st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from(["a", "b", "é", "\U0001f600", "A"])
    | st.none()
    | st.binary(max_size=2)
)


def _table(rows: list[tuple[object, str, str, bytes | str]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE calls (run_id TEXT NOT NULL, context_id TEXT NOT NULL, "
        "call_id TEXT NOT NULL, state TEXT, tool_id TEXT, tenant TEXT, updated_seq INTEGER, "
        "parent_span_id TEXT, data TEXT NOT NULL, row_seq INTEGER, row_mac TEXT, "
        "PRIMARY KEY (run_id, context_id, call_id))"
    )
    conn.executemany(
        "INSERT INTO calls (run_id, context_id, call_id, updated_seq, data) VALUES "
        "('r', ?, ?, ?, ?)",
        [(ctx, call, seq, data) for seq, ctx, call, data in rows],
    )
    return conn


def _ordered_by_sqlite(conn: sqlite3.Connection) -> list[bytes]:
    return [text_bytes(r[0]) for r in conn.execute(list_sql(_CALLS, "?"), ("r",))]


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(_cell, st.sampled_from(["c1", "c2", "é"]), st.text(max_size=2)),
        max_size=12,
        unique_by=lambda r: (r[1], r[2]),
    ),
    st.booleans(),
)
def test_stored_rows_are_in_sqlites_listing_order(
    keys: list[tuple[object, str, str]], plain: bool
) -> None:
    if plain:  # the common case: every updated_seq an integer of its own
        keys = [(i * 7 % 13, ctx, call) for i, (_, ctx, call) in enumerate(keys)]
    conn = _table([(*k, f'{{"n":{i}}}') for i, k in enumerate(keys)])
    assert stored_rows(conn, _CALLS, "r") == _ordered_by_sqlite(conn)


def test_a_key_that_is_not_utf8_fails_the_read_as_before() -> None:
    conn = _table([(1, "c", "x", "{}"), (1, "c", "y", "{}")])
    conn.execute("UPDATE calls SET context_id = CAST(X'FF' AS TEXT) WHERE call_id = 'x'")
    with pytest.raises(sqlite3.OperationalError):  # the ORDER BY query reads the keys too
        _ordered_by_sqlite(conn)
    with pytest.raises(sqlite3.OperationalError):
        stored_rows(conn, _CALLS, "r")


def test_data_is_read_as_its_bytes() -> None:
    conn = _table([(1, "c", "x", "{}"), (2, "c", "y", "{}"), (3, "c", "z", "{}")])
    conn.execute("UPDATE calls SET data = CAST(X'FF00' AS TEXT) WHERE call_id = 'x'")
    conn.execute("UPDATE calls SET data = X'7B7D' WHERE call_id = 'y'")  # a BLOB
    conn.execute("UPDATE calls SET data = 42 WHERE call_id = 'z'")
    assert stored_rows(conn, _CALLS, "r") == [b"\xff\x00", b"{}", b"42"]


async def test_a_row_whose_text_is_not_utf8_diverges(tmp_path: Path) -> None:
    # (Read as TEXT, Python's sqlite3 could not decode it: the read failed with a store error.)
    sql = "UPDATE tasks SET data = CAST(X'FF00' AS TEXT) WHERE task_id = 'report'"
    assert await _verify(await _edited_sqlite(tmp_path, sql)) == (False, "SNAPSHOT_DIVERGENCE")
