from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from charter.ledger.chain import LedgerKey
from charter.ledger.clock import Clock
from charter.ledger.jsonload import loads
from charter.ledger.lifecycle import InFlightCalls
from charter.stores.sqlite import SQLiteStore
from charter.testing.store_conformance import StoreFactory

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def create_database() -> str:
    name = f"charter_test_{secrets.token_hex(6)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name


def drop_database(name: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def _check_kept_rows(store: SQLiteStore) -> None:
    """The writer keeps parsed rows between batches and hands out shallow copies: safe only
    while no projection handler changes a row it reads (nested values included). Every row
    kept parsed must still equal a fresh parse of its stored text after the whole suite's
    appends ran through it."""
    hot = store._hot
    for key, row in hot.parsed.items():
        assert row == loads(hot.rows[key].encode()), f"the kept row {key} changed after parsing"


def sqlite_factory(tmp_path: Path, *, inline: Callable[[], bool] | None = None) -> StoreFactory:
    """A SQLite store in a new file under ``tmp_path`` per call, with the ``inline`` probe."""
    counter = iter(range(1000))

    @asynccontextmanager
    async def factory(
        *, key: LedgerKey, clock: Clock, in_flight: InFlightCalls
    ) -> AsyncIterator[SQLiteStore]:
        path = tmp_path / f"store-{next(counter)}.db"
        async with SQLiteStore.open(path, key=key, clock=clock, in_flight=in_flight) as s:
            s.inline = inline
            yield s
            _check_kept_rows(s)

    return factory
