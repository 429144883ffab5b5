"""SQL shared by the SQL backends: projection upserts generated from the table specs."""

from __future__ import annotations

from charter.contracts.canonical import canonical_text
from charter.ledger.projections import TABLES, Row, RowKey, TableSpec


def upsert_sql(spec: TableSpec, placeholder: str) -> str:
    cols = (*spec.keys, *spec.columns, "data")
    values = ", ".join([placeholder] * len(cols))
    updates = ", ".join(f"{c} = excluded.{c}" for c in (*spec.columns, "data"))
    keys = ", ".join(spec.keys)
    return (
        f"INSERT INTO {spec.name} ({', '.join(cols)}) VALUES ({values}) "
        f"ON CONFLICT ({keys}) DO UPDATE SET {updates}"
    )


def upsert_params(key: RowKey, row: Row) -> tuple[object, ...]:
    spec = TABLES[key.table]
    return (*key.key, *(row[c] for c in spec.columns), canonical_text(row))


def select_sql(spec: TableSpec, placeholder: str) -> str:
    where = " AND ".join(f"{k} = {placeholder}" for k in spec.keys)
    return f"SELECT data FROM {spec.name} WHERE {where}"


def list_sql(spec: TableSpec, placeholder: str) -> str:
    return (
        f"SELECT data FROM {spec.name} WHERE {spec.keys[0]} = {placeholder} "
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
        f"SELECT data FROM {spec.name} WHERE {where} "
        f"ORDER BY {spec.order_by}, {', '.join(spec.keys)} LIMIT {placeholder}"
    )
