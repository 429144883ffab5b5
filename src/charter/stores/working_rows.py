"""Rows of the store's working tables (``builds``, ``leases``) read back with their types
checked. These tables are not ledger data and carry no MAC (a Build record and an owner
lease are overwritten all the time), but SQLite stores any value in any column: a row edited
by hand (``UPDATE builds SET activation = 'x'``) must be refused with the table, the row and
the column named (``STORE_ROW_INVALID``), not crash ``charter serve``'s start with "internal
error (ValueError)". PostgreSQL's typed columns cannot hold such a value; the check is the
same for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from charter.errors import StoreError


def typed_row(
    table: str, row: Sequence[Any], kinds: Sequence[tuple[str, type]], fix: str
) -> tuple[Any, ...]:
    """``row`` (the first column its key) as read, when each value has the Python type its
    column's entry in ``kinds`` names (an ``int`` column never takes a ``bool``); else
    :class:`~charter.errors.StoreError` ``STORE_ROW_INVALID`` naming table, row and column,
    with ``fix`` (what the operator can do)."""
    for value, (column, kind) in zip(row, kinds, strict=True):
        if isinstance(value, kind) and not isinstance(value, bool):
            continue
        shown = repr(value if not isinstance(value, str) else value[:60])
        raise StoreError(
            f"the {table} row {_key(row[0])} holds {column} = {shown}, not "
            f"{'an integer' if kind is int else 'text'}: it was edited outside Charter; {fix}",
            reason="STORE_ROW_INVALID",
        )
    return tuple(row)


def _key(value: object) -> str:
    return repr(value[:80] if isinstance(value, str) else value)
