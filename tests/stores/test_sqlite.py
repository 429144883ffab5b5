"""The SQLite store: conformance, group commit, migrations, driver-error translation."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.errors import MigrationError, StoreConflict, StoreError
from charter.ledger.projections import RUN_TABLES, task_key
from charter.ledger.verify import verify_run
from charter.stores import migrations
from charter.stores.sqlite import SQLiteStore, translate_sqlite_error
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created
from charter.testing.store_conformance import StoreFactory
from tests.conformance import StoreSuite
from tests.stores.conftest import sqlite_factory


class TestSQLiteStore(StoreSuite):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return sqlite_factory(tmp_path)


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


async def _one_batch(
    store: SQLiteStore, path: Path, appends: list[Awaitable[Any]]
) -> tuple[list[Any], int]:
    """Run ``appends`` as one batch: the writer is held on another connection's write lock
    (busy with an append of its own) until all of them are queued. Returns their results and
    the commits made from the held append on."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    held = asyncio.ensure_future(store.append("run-held", [run_created()]))
    await asyncio.sleep(0.05)
    queued = [asyncio.ensure_future(a) for a in appends]
    await asyncio.sleep(0.05)
    before = store.commits
    blocker.execute("COMMIT")
    blocker.close()
    await held
    results = await asyncio.gather(*queued, return_exceptions=True)
    return results, store.commits - before


@pytest.mark.anyio
async def test_appends_in_one_batch_read_what_earlier_ones_wrote(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    path = tmp_path / "s.db"
    async with SQLiteStore.open(path, key=key) as store:
        await store.append("run-s", [run_created()])
        _, commits = await _one_batch(
            store,
            path,
            [
                store.append("run-s", [ev("task_created", task_id="t1")]),
                store.append("run-s", [ev("task_status_changed", task_id="t1", status="running")]),
                store.append("run-n", [run_created()]),
                store.append("run-n", [ev("task_progress", n=1)]),
            ],
        )
        assert commits == 2  # the held append, then the four together
        task = await store.get_row(task_key("run-s", "t1"))
        assert task is not None
        assert (task["status"], task["attempts"]) == ("running", 1)
        for run_id, seq in (("run-s", 3), ("run-n", 2)):
            report = await verify_run(store, run_id, key)
            assert report.ok
            assert report.head_seq == seq


@pytest.mark.anyio
async def test_a_write_conflict_fails_only_its_append(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    path = tmp_path / "c.db"
    async with SQLiteStore.open(path, key=key) as store:
        for run_id in ("run-a", "run-b"):
            await store.append(run_id, [run_created()])
        # Context ids are unique across runs: the second one fails when the batch is written.
        context = ev(
            "context_resolved",
            context_id="ctx-1",
            tenant="t",
            principal="p",
            expires_at="2030-01-01T00:00:00.000000Z",
        )
        results, commits = await _one_batch(
            store,
            path,
            [
                store.append("run-a", [context]),
                store.append("run-b", [context]),
                store.append("run-b", [ev("task_progress", n=1)]),
            ],
        )
        # The held append; the batch rolled back, then the two good appends alone.
        assert commits == 3
        assert not isinstance(results[0], BaseException)
        assert isinstance(results[1], StoreConflict)
        assert not isinstance(results[2], BaseException)
        for run_id, seq in (("run-a", 2), ("run-b", 2)):
            report = await verify_run(store, run_id, key)
            assert report.ok
            assert report.head_seq == seq


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


def test_only_delegated_calls_are_in_the_parent_index(tmp_path: Path) -> None:
    """Migration 20: the calls without a parent (nearly all) are left out of calls_by_parent,
    and the lookup of a call's children still uses it."""
    from charter.stores.sqlite import migrate

    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    migrate(conn, where="m.db")
    (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'calls_by_parent'").fetchone()
    assert sql.endswith("WHERE parent_span_id IS NOT NULL")
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT data FROM calls WHERE run_id = ? AND parent_span_id = ?",
        ("r", "s"),
    ).fetchall()
    assert "USING INDEX calls_by_parent" in plan[0][3]
    conn.close()


def undo_edit_triggers(conn: sqlite3.Connection) -> None:
    """Back to a schema before migration 13: no ledger_edits table, no triggers on events
    (a table renamed away took its triggers along), none on the row tables (migrations 14
    and 15)."""
    conn.execute("DROP TRIGGER IF EXISTS events_updated")
    conn.execute("DROP TRIGGER IF EXISTS events_deleted")
    for table in migrations.ROW_TABLES:
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_row_deleted")
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_key_changed")
    conn.execute("DROP TABLE ledger_edits")


def undo_row_macs(conn: sqlite3.Connection) -> None:
    """Back to a schema before migration 9: projection rows without row_seq and row_mac."""
    for table in ("runs", *RUN_TABLES):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN row_seq")
        conn.execute(f"ALTER TABLE {table} DROP COLUMN row_mac")
    conn.execute("DROP TABLE run_ledger_flags")


@pytest.mark.anyio
async def test_the_tenant_column_is_filled_in_for_existing_runs(tmp_path: Path) -> None:
    """A database from before the runs' tenant column lists its runs per tenant once opened."""
    path, key = tmp_path / "old.db", fixed_ledger_key()
    async with SQLiteStore.open(path, key=key) as store:
        await store.append("run-a", [ev("run_created", **run_created().payload, tenant="acme")])
        await store.append("run-g", [ev("run_created", **run_created().payload, tenant="globex")])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP INDEX runs_by_tenant")  # back to schema version 3, before the column
    conn.execute("ALTER TABLE runs DROP COLUMN tenant")
    conn.execute("DROP INDEX calls_by_call_id")
    conn.execute("DROP TABLE conversations")  # and before migration 7's tables
    conn.execute("DROP TABLE conversation_events")
    undo_row_macs(conn)
    conn.execute("DROP TABLE leases")  # and migration 11's
    conn.execute("DROP INDEX calls_by_parent")  # and migration 12's
    conn.execute("ALTER TABLE calls DROP COLUMN parent_span_id")
    undo_edit_triggers(conn)  # and migration 13's
    conn.execute("DROP TABLE builds")  # and migration 19's
    conn.execute(f"DELETE FROM {migrations.SCHEMA_TABLE} WHERE version > 3")
    conn.close()
    async with SQLiteStore.open(path, key=key) as store:
        assert [s.run["run_id"] for s in await store.list_runs(tenant="acme")] == ["run-a"]
        assert [s.run["run_id"] for s in await store.list_runs(tenant="globex")] == ["run-g"]
        assert (await verify_run(store, "run-a", key)).ok


@pytest.mark.anyio
async def test_events_move_to_the_append_ordered_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Schema 6: a database whose events are clustered by (run_id, seq) keeps every event,
    still verifies, and still refuses a second event at a run's sequence number."""
    path, key = tmp_path / "v5.db", fixed_ledger_key()
    async with SQLiteStore.open(path, key=key) as store:
        for run in ("run-a", "run-b"):
            await store.append(run, [run_created()])
        for i in range(3):
            for run in ("run-a", "run-b"):
                await store.append(run, [ev("task_progress", n=i)])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE events RENAME TO events_new")  # back to the version-5 layout
    conn.execute(
        "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, "
        "at TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, data BLOB NOT NULL, "
        "PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO events SELECT * FROM events_new")
    conn.execute("DROP TABLE events_new")
    conn.execute("DROP TABLE conversations")  # and before migration 7's tables
    conn.execute("DROP TABLE conversation_events")
    undo_row_macs(conn)
    conn.execute("DROP TABLE leases")  # and migration 11's
    conn.execute("DROP INDEX calls_by_parent")  # and migration 12's
    conn.execute("ALTER TABLE calls DROP COLUMN parent_span_id")
    undo_edit_triggers(conn)  # and migration 13's
    conn.execute("DROP TABLE builds")  # and migration 19's
    conn.execute(f"DELETE FROM {migrations.SCHEMA_TABLE} WHERE version > 5")
    conn.close()
    caplog.set_level("INFO", logger="charter.stores.sqlite")
    async with SQLiteStore.open(path, key=key) as store:
        assert f"from schema version 5 to {len(migrations.SQLITE)}" in caplog.text
        for run in ("run-a", "run-b"):
            report = await verify_run(store, run, key)
            assert report.ok, report
            assert report.events == 4
        await store.append("run-a", [ev("task_progress", n=9)])
        assert (await verify_run(store, "run-a", key)).events == 5
    conn = sqlite3.connect(path, isolation_level=None)
    assert (
        "WITHOUT ROWID"
        not in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
    )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO events SELECT run_id, seq, type, at, prev_hash, hash, data FROM events "
            "WHERE run_id = 'run-a' AND seq = 2"
        )
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
