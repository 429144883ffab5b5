"""Projection rows are authenticated (issue 16): each row carries the sequence of the event
that last wrote it and a MAC under the ledger key, checked on every read; rows written before
the MACs existed are sealed from the verified rebuild the first time a process touches their
run. SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from charter.ledger.events import NewEvent
from charter.ledger.projections import RUN_TABLES, run_key, task_key
from charter.ledger.trust import RunLedgerInvalid
from charter.stores.postgres import PostgresStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import SAMPLE_RUN, record_sample_run

pytestmark = pytest.mark.anyio
KEY = fixed_ledger_key()

Opener = Callable[[], AbstractAsyncContextManager[Any]]
Sql = Callable[..., list[tuple[Any, ...]]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Opener, Sql]:
    if request.param == "sqlite":
        path = tmp_path / "s.db"

        def sql_lite(statement: str, *params: Any) -> list[tuple[Any, ...]]:
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                return list(conn.execute(statement, params).fetchall())
            finally:
                conn.close()

        return (lambda: SQLiteStore.open(path, key=KEY)), sql_lite
    url: str = request.getfixturevalue("pg_url")

    def sql_pg(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(statement.replace("?", "%s").encode(), params)
            return list(cur.fetchall()) if cur.description else []

    return (lambda: PostgresStore.open(url, key=KEY)), sql_pg


async def _seed(open_store: Opener) -> None:
    async with open_store() as store:
        await record_sample_run(store, "run-1")
        await record_sample_run(store, "run-2")
        proposal = {"proposal_id": "p-1", "tenant": "acme", "kind": "workflow"}
        await store.append("run-1", [NewEvent(type="proposal_created", payload=proposal)])


@pytest.mark.parametrize("table", ["runs", "tasks", "artifacts", "proposals"])
async def test_an_edited_row_is_never_served(table: str, backend: tuple[Opener, Sql]) -> None:
    open_store, sql = backend
    await _seed(open_store)
    async with open_store() as store:
        assert await store.get_row(run_key("run-1"))  # first touch: verified
        sql(f"UPDATE {table} SET data = '{{\"x\":1,' || substr(data, 2) WHERE run_id = 'run-1'")
        read = (
            store.get_row(run_key("run-1")) if table == "runs" else store.list_rows(table, "run-1")
        )
        with pytest.raises(RunLedgerInvalid) as caught:
            await read
        assert caught.value.problem.reason == "ROW_MAC_INVALID"
        with pytest.raises(RunLedgerInvalid):  # refused from now on, whatever is read
            await store.get_row(task_key("run-1", "t-retrieve"))
        assert (await store.get_row(run_key("run-2"))) is not None  # the neighbour is served


async def test_rows_without_a_mac_are_sealed_from_the_verified_rebuild(
    backend: tuple[Opener, Sql],
) -> None:
    """A database from before row MACs: the first touch verifies the run and gives its rows
    their MACs; a row that disagrees with the events gets none and the run is refused."""
    open_store, sql = backend
    await _seed(open_store)
    for table in ("runs", *RUN_TABLES):
        sql(f"UPDATE {table} SET row_seq = NULL, row_mac = NULL")
    sql(
        "UPDATE tasks SET data = replace(data, '\"attempts\":2', '\"attempts\":1') "
        "WHERE run_id = 'run-2'"
    )
    async with open_store() as store:
        assert (await store.get_row(run_key("run-1"))) is not None
        unsealed = [
            n
            for t in ("runs", *RUN_TABLES)
            for (n,) in sql(f"SELECT count(*) FROM {t} WHERE run_id = 'run-1' AND row_mac IS NULL")
        ]
        assert sum(unsealed) == 0
        with pytest.raises(RunLedgerInvalid) as caught:
            await store.get_row(run_key("run-2"))
        assert caught.value.problem.reason == "SNAPSHOT_DIVERGENCE"
        [(left,)] = sql("SELECT count(*) FROM tasks WHERE run_id = 'run-2' AND row_mac IS NULL")
        assert left > 0
    async with open_store() as store:  # sealed rows verify in the next process too
        assert await store.list_rows("tasks", "run-1")


async def test_a_row_edited_under_an_open_writer_is_not_used_from_its_memory(
    backend: tuple[Opener, Sql],
) -> None:
    """The SQLite writer keeps the rows it committed for its next appends; an edit by another
    connection (here, someone with the database file) makes it forget them, so the next
    append reads the edited row, finds its MAC broken and refuses the run."""
    open_store, sql = backend
    async with open_store() as store:
        for run_id in ("run-1", "run-2"):  # both still running
            for entry in SAMPLE_RUN[:-2]:
                await store.append(run_id, [entry])
        sql(
            'UPDATE runs SET data = replace(data, \'"status":"running"\', ?) '
            "WHERE run_id = 'run-1'",
            '"status":"completed"',
        )
        with pytest.raises(RunLedgerInvalid) as caught:
            await store.append(
                "run-1",
                [
                    NewEvent(
                        type="task_status_changed",
                        payload={"task_id": "report", "status": "completed"},
                    )
                ],
            )
        assert caught.value.problem.reason == "ROW_MAC_INVALID"
        await store.append(  # the neighbour still appends
            "run-2",
            [
                NewEvent(
                    type="task_status_changed", payload={"task_id": "report", "status": "completed"}
                )
            ],
        )


async def test_an_edited_indexed_column_is_never_believed(backend: tuple[Opener, Sql]) -> None:
    """The MAC covers a row's text and key; its indexed columns are copies of the text's
    values. A run moved to another tenant by its column is not listed as that tenant's run:
    a listing by the column leaves it out, the tenant's run list shows only its id and the
    problem, and the run is refused."""
    open_store, sql = backend
    await _seed(open_store)
    sql("UPDATE runs SET tenant = 'evil' WHERE run_id = 'run-1'")
    async with open_store() as store:
        assert await store.query_rows("runs", {"tenant": "evil"}) == []
        [listed] = await store.list_runs(tenant="evil")
        assert listed.run == {"run_id": "run-1"}
        assert listed.problem is not None
        assert listed.problem.reason == "ROW_MAC_INVALID"
        assert "runs row's tenant column" in listed.problem.message
        with pytest.raises(RunLedgerInvalid):
            await store.get_row(run_key("run-1"))
        assert (await store.get_row(run_key("run-2"))) is not None


async def test_a_listing_does_not_serve_a_row_without_a_mac_moved_by_its_column(
    backend: tuple[Opener, Sql],
) -> None:
    """A run row without a MAC (a database from before row MACs, or one cleared by hand) is
    listed unverified until its run's first touch — but not with a tenant column that
    disagrees with its text: the run is refused, and only its id and the problem are listed."""
    open_store, sql = backend
    await _seed(open_store)
    sql("UPDATE runs SET row_seq = NULL, row_mac = NULL, tenant = 'evil' WHERE run_id = 'run-1'")
    sql("UPDATE runs SET row_seq = NULL, row_mac = NULL WHERE run_id = 'run-2'")
    async with open_store() as store:
        [listed] = await store.list_runs(tenant="evil")
        assert listed.run == {"run_id": "run-1"}
        assert listed.problem is not None
        assert listed.problem.reason == "ROW_MAC_INVALID"
        assert "tenant column" in listed.problem.message
        everyone = {s.run["run_id"]: s for s in await store.list_runs()}
        assert everyone["run-2"].problem is None  # unsealed, consistent: listed as read
        assert everyone["run-2"].run["status"] == "completed"
