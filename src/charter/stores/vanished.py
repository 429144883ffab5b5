"""Rows looked up by their own id whose row is gone: which run they belonged to.

A context, an approval, a proposal (and a call, by its call id alone) is found without its
run, through an index on its id. A row deleted outside Charter leaves nothing to find: the
lookup would answer "no such context" for a context the ledger still holds. The
``ledger_edits`` triggers (SQLite migration 15, PostgreSQL 14) keep the deleted row's id in
``row_key`` — and note a row whose id or run was changed in place (``rekey <table>``) — so a
lookup that finds nothing asks here which run held the id, and
:func:`charter.ledger.trust.refuse_vanished` verifies (and refuses) that run. Someone who can
edit the database can drop the triggers too; the run is then found damaged by the next
process that verifies it (``charter runs verify``, any other touch of the run).
"""

from __future__ import annotations

from collections.abc import Sequence

VANISHED_SQL = (
    "SELECT DISTINCT run_id FROM ledger_edits WHERE row_key = {p} AND op IN ({p}, {p}) "
    "AND run_id IS NOT NULL LIMIT 16"
)


def vanished_params(table: str, key: str) -> tuple[str, str, str]:
    return (key, f"delete {table}", f"rekey {table}")


def run_ids(rows: Sequence[Sequence[object]]) -> list[str]:
    return [str(got[0]) for got in rows]
