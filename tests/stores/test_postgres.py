"""The PostgreSQL store: conformance on a fresh database, NOTIFY wake-ups, migrations."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import psycopg
import psycopg.errors
import pytest
from psycopg_pool import PoolTimeout

from charter.errors import MigrationError, StoreConflict, StoreError
from charter.ledger.chain import LedgerKey
from charter.ledger.clock import Clock
from charter.ledger.lifecycle import InFlightCalls
from charter.ledger.subscribe import subscribe
from charter.stores import migrations
from charter.stores.postgres import PostgresStore, translate_psycopg_error
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created
from charter.testing.store_conformance import StoreFactory
from tests.conformance import StoreSuite
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def class_db() -> Iterator[str]:
    name = create_database()
    try:
        yield name
    finally:
        drop_database(name)


class TestPostgresStore(StoreSuite):
    @pytest.fixture
    def store_factory(self, class_db: str) -> StoreFactory:
        url = f"postgresql://postgres@127.0.0.1:5432/{class_db}"

        @asynccontextmanager
        async def factory(
            *, key: LedgerKey, clock: Clock, in_flight: InFlightCalls
        ) -> AsyncIterator[PostgresStore]:
            with psycopg.connect(url, autocommit=True) as conn:  # a fresh, empty schema
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public")
            async with PostgresStore.open(url, key=key, clock=clock, in_flight=in_flight) as s:
                yield s

        return factory


@pytest.mark.anyio
async def test_notify_wakes_a_subscriber_on_another_store(pg_url: str) -> None:
    key = fixed_ledger_key()
    async with (
        PostgresStore.open(pg_url, key=key) as writer,
        PostgresStore.open(pg_url, key=key) as reader,
    ):
        await writer.append("run-n", [run_created()])
        seen: list[int] = []

        async def follow() -> None:
            # A long poll interval: only NOTIFY can deliver the next event in time.
            async for event in subscribe(reader, "run-n", after=1, poll_s=60):
                seen.append(event.seq)
                return

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await anyio.sleep(0.3)
                await writer.append("run-n", [ev("task_progress", n=1)])
        assert seen == [2]


@pytest.mark.anyio
async def test_newer_schema_is_refused(pg_url: str) -> None:
    async with PostgresStore.open(pg_url, key=fixed_ledger_key()):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {migrations.SCHEMA_TABLE} VALUES (%s, 'x')",
            (len(migrations.POSTGRES) + 1,),
        )
    with pytest.raises(MigrationError) as info:
        async with PostgresStore.open(pg_url, key=fixed_ledger_key()):
            pass
    assert info.value.reason == "STORE_SCHEMA_TOO_NEW"


@pytest.mark.anyio
async def test_only_delegated_calls_are_in_the_parent_index(pg_url: str) -> None:
    """Migration 19: the calls without a parent are left out of calls_by_parent."""
    async with PostgresStore.open(pg_url, key=fixed_ledger_key()):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'calls_by_parent'"
        ).fetchone()
    assert row is not None
    assert row[0].endswith("WHERE (parent_span_id IS NOT NULL)")


@pytest.mark.anyio
async def test_two_stores_racing_on_one_run(pg_url: str) -> None:
    key = fixed_ledger_key()
    async with PostgresStore.open(pg_url, key=key) as a, PostgresStore.open(pg_url, key=key) as b:
        await a.append("run-2", [run_created()])

        async def writer(store: PostgresStore, n: int) -> None:
            for i in range(15):
                await store.append("run-2", [ev("task_progress", w=n, i=i)])

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(writer, a if n % 2 else b, n)
        head = await a.head("run-2")
        assert head is not None
        assert head.seq == 61
        with pytest.raises(StoreConflict):
            await b.append("run-2", [run_created()])


@pytest.mark.anyio
async def test_unreachable_server_is_a_store_error() -> None:
    with pytest.raises(StoreError) as info:
        async with PostgresStore.open(
            "postgresql://postgres@127.0.0.1:1/nope?connect_timeout=1",
            key=fixed_ledger_key(),
            min_size=1,
            open_timeout=1.0,
        ):
            pass
    assert info.value.retryable


def _all_subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_all_subclasses(sub))
    return out


def test_every_psycopg_error_is_translated() -> None:
    classes = _all_subclasses(psycopg.Error)
    assert len(classes) > 100  # the whole SQLSTATE tree
    for cls in classes:
        try:
            exc = cls("boom")
        except TypeError:  # pragma: no cover - every class takes a message today
            continue
        assert isinstance(translate_psycopg_error(exc), StoreError), cls
    assert isinstance(translate_psycopg_error(psycopg.errors.UniqueViolation("x")), StoreConflict)
    assert translate_psycopg_error(psycopg.errors.DeadlockDetected("x")).retryable
    assert translate_psycopg_error(PoolTimeout("x")).reason == "STORE_UNAVAILABLE"
