from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from charter.ledger.chain import LedgerKey
from charter.ledger.clock import Clock
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

    return factory
