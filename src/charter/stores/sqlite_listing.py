"""A run's stored projection rows as bytes, in listing order (verification's read of them),
and the runs a listing shows as damaged because their run row is gone.

:func:`stored_rows` gives what ``SELECT data … ORDER BY`` :func:`~charter.stores._sql.list_sql`
gives, at about half the cost for a large table: SQLite sorts a query's whole result through a
temporary B-tree when no index is in listing order (the calls table has none), so the rows'
data — most of a verified replay's snapshot read — would be copied through the sorter. Here
the rows are read unordered with their listing columns and sorted by those in Python.
"""

from __future__ import annotations

import sqlite3
from operator import itemgetter
from typing import Any

from charter.ledger.chain import LedgerKey
from charter.ledger.ports import RunSummary
from charter.ledger.rows import TableSpec
from charter.stores._sql import list_sql
from charter.stores.flags import ROWLESS_GATE_SQL, ROWLESS_SQL, rowless_summaries


def stored_rows(conn: sqlite3.Connection, spec: TableSpec, run_id: str) -> list[bytes]:
    """``data`` of ``spec``'s rows of ``run_id`` as bytes, ordered as :func:`list_sql` orders
    (:func:`stored_table` without the indexed columns)."""
    return stored_table(conn, spec, run_id)[0]


def stored_table(
    conn: sqlite3.Connection, spec: TableSpec, run_id: str
) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    """``data`` of ``spec``'s rows of ``run_id`` as bytes, ordered as :func:`list_sql` orders,
    and each row's compared columns (``spec.compared``: its keys after ``run_id``, its indexed
    columns) as stored, in the same order.

    The rows are read with their ``order_by`` column alone and sorted by it when no two rows
    share a value (every call row has its own ``updated_seq``): the key columns only break
    ties. Python orders what SQLite's ``ORDER BY`` orders alike here: numbers by value
    (integers and reals mixed), text by code point (SQLite's BINARY collation compares UTF-8
    bytes, which order as code points do). Anything else — equal values, NULL, a BLOB in a
    text column, text beside numbers (the sort raises ``TypeError``) — and SQLite orders the
    rows itself, as before.

    ``data`` is read as its bytes (``CAST … AS BLOB``): TEXT as written without a decode and
    an encode, and text that is not UTF-8 as its bytes, which verification then reports as a
    row that is not JSON.
    """
    columns = "".join(f", {c}" for c in spec.compared)
    sql = (
        f"SELECT {spec.order_by}, CAST(data AS BLOB){columns} FROM {spec.name} "
        f"WHERE {spec.keys[0]} = ?"
    )
    got = conn.execute(sql, (run_id,)).fetchall()
    if len({r[0] for r in got}) == len(got):
        try:
            got.sort(key=_first)
        except TypeError:
            pass
        else:
            return [text_bytes(r[1]) for r in got], [r[2:] for r in got]
    listed = conn.execute(list_sql(spec, "?"), (run_id,)).fetchall()
    return [text_bytes(r[0]) for r in listed], [r[4:] for r in listed]  # after data… run_id


_first = itemgetter(0)


def text_bytes(value: object) -> bytes:
    """A projection row's stored ``data`` as bytes: TEXT as written, or whatever else a damaged
    row holds (a BLOB as it is, a number as its text), for verification to compare."""
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def rowless_runs(
    conn: sqlite3.Connection, tenant: str | None, key: LedgerKey | None
) -> list[RunSummary]:
    """The runs a listing must show as damaged because their run row is gone
    (:data:`~charter.stores.flags.ROWLESS_SQL`), looked for only when the gate says one may
    be."""
    if not conn.execute(ROWLESS_GATE_SQL).fetchone()[0]:
        return []
    return rowless_summaries(conn.execute(ROWLESS_SQL).fetchall(), tenant, key)
