"""SQL shared by the SQL backends: projection upserts generated from the table specs, and the
authentication of every projection row they write and read.

Each projection row carries ``row_seq`` (the sequence of the event that last wrote it) and
``row_mac`` (:meth:`~charter.ledger.chain.LedgerKey.row_mac` over table, key, stored text and
``row_seq``). Reads select ``data, row_seq, row_mac``, the key columns and the indexed columns,
in that order (:func:`read_columns`), and :class:`RowOpener` serves a row only if its MAC
verifies and every indexed column holds what the authenticated text says: the MAC covers the
text and the key, and the indexed columns are copies of the text's values that queries filter
on (a tenant, a state), so a copy edited by hand must not move a row into another tenant's or
another state's listing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from charter.contracts.canonical import canonical_bytes, canonical_text
from charter.errors import InvalidInput
from charter.ledger.chain import LedgerKey, same_mac
from charter.ledger.checker import storage_class
from charter.ledger.jsonload import loads
from charter.ledger.projections import TABLES, Row, RowKey, TableSpec
from charter.ledger.trust import LedgerTrust, RowUnsealed, RunLedgerInvalid, RunProblem


def unencodable_key() -> InvalidInput:
    """A caller's key that no store can hold — a lone surrogate (not Unicode), or a NUL
    (PostgreSQL text cannot hold it) — so no stored row has it: ``INVALID_IDENTIFIER``, not
    a store failure (the SQLite store answers the same)."""
    return InvalidInput(
        "an identifier holds a lone surrogate or a NUL character", reason="INVALID_IDENTIFIER"
    )


# Columns a query may filter on without naming a run or an id: such a query lists rows of
# many runs, and a row that fails its MAC is left out (its run is refused) instead of failing
# the whole list.
LISTING_COLUMNS = frozenset({"status", "state", "tenant"})


def upsert_sql(spec: TableSpec, placeholder: str) -> str:
    cols = (*spec.keys, *spec.columns, "data", "row_seq", "row_mac")
    values = ", ".join([placeholder] * len(cols))
    changing = (c for c in spec.columns if c not in spec.fixed)
    updates = ", ".join(f"{c} = excluded.{c}" for c in (*changing, "data", "row_seq", "row_mac"))
    keys = ", ".join(spec.keys)
    return (
        f"INSERT INTO {spec.name} ({', '.join(cols)}) VALUES ({values}) "
        f"ON CONFLICT ({keys}) DO UPDATE SET {updates}"
    )


DATA_AT = -3
"""Where the stored text sits in :func:`upsert_params`' tuple."""


def upsert_params(
    key: RowKey, row: Row, seq: int, ledger_key: LedgerKey | None, data: bytes | None = None
) -> tuple[object, ...]:
    """Parameters of :func:`upsert_sql`; ``ledger_key`` None writes no MAC (checks off).
    ``data``: ``canonical_bytes(row)``, when the caller has it already."""
    spec = TABLES[key.table]
    if data is None:
        data = canonical_bytes(row)  # the MAC's bytes; the stored text is their decoding
    mac = None if ledger_key is None else ledger_key.row_mac(key.table, key.key, data, seq)
    # a column a row may leave out (calls.parent_span_id) is stored NULL
    return (*key.key, *map(row.get, spec.columns), data.decode(), seq, mac)


def read_columns(spec: TableSpec, alias: str = "") -> str:
    """What every read of ``spec``'s rows selects, in :class:`RowOpener`'s order (``alias``:
    the table's alias in a join, with its dot)."""
    return ", ".join(
        f"{alias}{c}" for c in ("data", "row_seq", "row_mac", *spec.keys, *spec.columns)
    )


def read_width(spec: TableSpec) -> int:
    """How many values :func:`read_columns` selects."""
    return 3 + len(spec.keys) + len(spec.columns)


def select_sql(spec: TableSpec, placeholder: str) -> str:
    where = " AND ".join(f"{k} = {placeholder}" for k in spec.keys)
    return f"SELECT {read_columns(spec)} FROM {spec.name} WHERE {where}"


def list_sql(spec: TableSpec, placeholder: str) -> str:
    return (
        f"SELECT {read_columns(spec)} FROM {spec.name} WHERE {spec.keys[0]} = {placeholder} "
        f"ORDER BY {spec.order_by}, {', '.join(spec.keys)}"
    )


def query_sql(spec: TableSpec, columns: tuple[str, ...], placeholder: str) -> str:
    """Rows whose key or indexed ``columns`` equal the given values, in table order."""
    allowed = (*spec.keys, *spec.columns)
    for column in columns:
        if column not in allowed:
            raise ValueError(f"{spec.name}.{column} is not a key or indexed column")
    where = " AND ".join(f"{c} = {placeholder}" for c in columns) or "TRUE"
    return (
        f"SELECT {read_columns(spec)} FROM {spec.name} WHERE {where} "
        f"ORDER BY {spec.order_by}, {', '.join(spec.keys)} LIMIT {placeholder}"
    )


def seal_sql(spec: TableSpec, placeholder: str) -> str:
    """Give a row without a MAC its MAC, only while it still holds the verified text."""
    where = " AND ".join(f"{k} = {placeholder}" for k in spec.keys)
    return (
        f"UPDATE {spec.name} SET row_seq = {placeholder}, row_mac = {placeholder} "
        f"WHERE {where} AND row_mac IS NULL AND data = {placeholder}"
    )


def seal_params(
    rows: dict[RowKey, Row], run_id: str, seq: int, ledger_key: LedgerKey
) -> dict[str, list[tuple[object, ...]]]:
    """:func:`seal_sql` parameters for every rebuilt row of ``run_id``, by table."""
    out: dict[str, list[tuple[object, ...]]] = {}
    for key, row in rows.items():
        if key.key[0] != run_id:
            continue
        text = canonical_text(row)
        mac = ledger_key.row_mac(key.table, key.key, text.encode(), seq)
        out.setdefault(key.table, []).append((seq, mac, *key.key, text))
    return out


def _text(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def differing_column(spec: TableSpec, row: Row, stored: Sequence[Any]) -> str | None:
    """The first indexed column of ``spec`` whose ``stored`` value is not the one ``row`` (the
    row's text, parsed) holds — a column the row leaves out is stored NULL — or None."""
    if len(stored) != len(spec.columns):
        raise ValueError(f"a {spec.name} row was read without its indexed columns")
    for name, value in zip(spec.columns, stored, strict=True):
        if row.get(name) != value:
            return name
    return None


def _column_message(table: str, column: str) -> str:
    return (
        f"{_a(table)} row's {column} column does not hold the value of the row's text "
        "(edited outside Charter)"
    )


def _a(table: str) -> str:
    """The article and the table's name, for a message: "a calls", "an approvals"."""
    return f"{'an' if table[0] in 'aeiou' else 'a'} {table}"


class RowOpener:
    """Checks a projection row's MAC before it is parsed and served.

    ``got`` is a row as :func:`select_sql` / :func:`list_sql` / :func:`query_sql` return it.
    A row that fails is never returned: the run is refused through ``trust``
    (``ROW_MAC_INVALID``). With checks off (``trust.enabled`` false) rows are parsed as read.
    """

    def __init__(self, trust: LedgerTrust) -> None:
        self.trust = trust
        self.key = trust.key

    def open(self, table: str, got: Sequence[Any]) -> Row:
        if not self.trust.enabled:
            return dict(loads(_text(got[0])))
        spec = TABLES[table]
        data, seq, mac = _text(got[0]), got[1], got[2]
        columns_at = 3 + len(spec.keys)
        key = tuple(str(k) for k in got[3:columns_at])
        run_id = key[0]
        self.trust.refuse_if_invalid(run_id)
        if mac is None or type(seq) is not int:  # SQLite keeps what a hand edit stores
            if self.trust.verified(run_id) is None:
                raise RowUnsealed(run_id)
            what = (
                "has no MAC"
                if mac is None or seq is None
                else f"has its row_seq stored as {storage_class(seq)}"
            )
            raise self.trust.fail(
                RunProblem(
                    run_id=run_id,
                    reason="ROW_MAC_INVALID",
                    seq=None,
                    message=f"{_a(table)} row {what} (inserted or edited outside Charter)",
                )
            )
        expected = self.key.row_mac(table, key, data, seq)
        if not same_mac(expected, mac):
            raise self.trust.fail(
                RunProblem(
                    run_id=run_id,
                    reason="ROW_MAC_INVALID",
                    seq=seq,
                    message=f"{_a(table)} row does not match its MAC (edited outside Charter)",
                )
            )
        known = self.trust.verified(run_id)
        if known is not None and seq > known[0]:
            # A row written past the verified head: an append of another process, or a row
            # from elsewhere. It is served once the events up to it are verified.
            raise RowUnsealed(run_id)
        try:
            row = dict(loads(data))
        except ValueError:
            raise self.trust.fail(
                RunProblem(
                    run_id=run_id,
                    reason="ROW_MAC_INVALID",
                    seq=seq,
                    message=f"{_a(table)} row is not JSON text",
                )
            ) from None
        column = differing_column(spec, row, got[columns_at:])
        if column is not None:
            raise self.trust.fail(
                RunProblem(
                    run_id=run_id,
                    reason="ROW_MAC_INVALID",
                    seq=seq,
                    message=_column_message(table, column),
                )
            )
        return row

    def listed(self, table: str, got: Sequence[Any]) -> Row:
        """:meth:`open` for a listing that does not verify runs: a row that only waits for
        its run's first verified touch (no MAC yet, or written past the verified head) is
        served as read, but never with an indexed column that disagrees with its text (a run
        moved into another tenant's list by its column alone is refused as with a MAC)."""
        try:
            return self.open(table, got)
        except RowUnsealed:
            pass
        spec = TABLES[table]
        run_id = str(got[3])
        try:
            row = dict(loads(_text(got[0])))
        except ValueError:
            raise self.trust.fail(
                RunProblem(
                    run_id=run_id,
                    reason="ROW_MAC_INVALID",
                    seq=None,
                    message=f"{_a(table)} row is not JSON text",
                )
            ) from None
        column = differing_column(spec, row, got[3 + len(spec.keys) :])
        if column is not None:
            raise self.trust.fail(
                RunProblem(
                    run_id=run_id,
                    reason="ROW_MAC_INVALID",
                    seq=None,
                    message=_column_message(table, column),
                )
            )
        return row

    def opt(self, table: str, got: Sequence[Any] | None) -> Row | None:
        return None if got is None else self.open(table, got)

    def many(self, table: str, rows: Sequence[Sequence[Any]], *, listing: bool) -> list[Row]:
        """Open every row; in a ``listing`` (many runs), leave out rows of refused runs."""
        if not listing:
            return [self.open(table, r) for r in rows]
        out: list[Row] = []
        for got in rows:
            try:
                out.append(self.open(table, got))
            except RunLedgerInvalid:
                continue  # the run is refused (and shown as such); the list goes on
        return out
