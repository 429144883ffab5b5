"""The SQLite store: conformance, group commit, migrations, driver-error translation."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from charter.errors import MigrationError, StoreConflict, StoreError
from charter.ledger.chain import LedgerKey
from charter.ledger.clock import Clock
from charter.ledger.lifecycle import InFlightCalls
from charter.ledger.verify import verify_run
from charter.stores import migrations
from charter.stores.sqlite import SQLiteStore, translate_sqlite_error
from charter.testing.conformance import StoreConformance, StoreFactory
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        counter = iter(range(1000))

        @asynccontextmanager
        async def factory(
            *, key: LedgerKey, clock: Clock, in_flight: InFlightCalls
        ) -> AsyncIterator[SQLiteStore]:
            path = tmp_path / f"store-{next(counter)}.db"
            async with SQLiteStore.open(path, key=key, clock=clock, in_flight=in_flight) as s:
                yield s

        return factory


@pytest.mark.anyio
async def test_group_commit_batches_concurrent_appends(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    async with SQLiteStore.open(tmp_path / "g.db", key=key) as store:
        await store.append("run-g", [run_created()])
        before = store.commits

        async def one(i: int) -> None:
            await store.append("run-g", [ev("task_progress", n=i)])

        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(one, i)
        used = store.commits - before
        assert 1 <= used < 32
        report = await verify_run(store, "run-g", key)
        assert report.ok
        assert report.head_seq == 65


@pytest.mark.anyio
async def test_a_refused_append_does_not_fail_its_batch(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    async with SQLiteStore.open(tmp_path / "b.db", key=key) as store:
        await store.append("run-b", [run_created()])
        results: list[str] = []

        async def good(i: int) -> None:
            await store.append("run-b", [ev("task_progress", n=i)])
            results.append("ok")

        async def bad() -> None:
            try:
                await store.append("run-b", [ev("run_status_changed", status="completed")])
            except Exception as exc:
                results.append(getattr(exc, "reason", "?"))

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(good, i)
            tg.start_soon(bad)
        assert sorted(results) == ["ILLEGAL_TRANSITION"] + ["ok"] * 10


@pytest.mark.anyio
async def test_reopen_keeps_the_data(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    path = tmp_path / "r.db"
    async with SQLiteStore.open(path, key=key) as store:
        await store.append("run-r", [run_created()])
    async with SQLiteStore.open(path, key=key) as store:
        head = await store.head("run-r")
        assert head is not None
        assert head.seq == 1
        with pytest.raises(StoreConflict):
            await store.append("run-r", [run_created()])


@pytest.mark.anyio
async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with SQLiteStore.open(path, key=fixed_ledger_key()):
        pass
    conn = sqlite3.connect(path)
    conn.execute(
        f"INSERT INTO {migrations.SCHEMA_TABLE} VALUES (?, 'x')", (len(migrations.SQLITE) + 1,)
    )
    conn.commit()
    conn.close()
    with pytest.raises(MigrationError) as info:
        async with SQLiteStore.open(path, key=fixed_ledger_key()):
            pass
    assert info.value.reason == "STORE_SCHEMA_TOO_NEW"
    assert "newer Charter" in str(info.value)


def test_migrations_are_recorded(tmp_path: Path) -> None:
    from charter.stores.sqlite import migrate

    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    assert migrate(conn, where="m.db") == len(migrations.SQLITE)
    assert migrate(conn, where="m.db") == len(migrations.SQLITE)  # idempotent
    versions = [v for (v,) in conn.execute(f"SELECT version FROM {migrations.SCHEMA_TABLE}")]
    assert versions == list(range(1, len(migrations.SQLITE) + 1))
    conn.close()


def _all_subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_all_subclasses(sub))
    return out


def test_every_sqlite_error_is_translated() -> None:
    classes = _all_subclasses(sqlite3.Error)
    assert sqlite3.IntegrityError in classes
    for cls in classes:
        translated = translate_sqlite_error(cls("boom"))
        assert isinstance(translated, StoreError), cls
    assert isinstance(translate_sqlite_error(sqlite3.IntegrityError("x")), StoreConflict)
    locked = translate_sqlite_error(sqlite3.OperationalError("database is locked"))
    assert locked.reason == "STORE_BUSY"
    assert locked.retryable


@pytest.mark.anyio
async def test_unwritable_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError):
        async with SQLiteStore.open(tmp_path / "file" / "db.sqlite", key=fixed_ledger_key()):
            pass
