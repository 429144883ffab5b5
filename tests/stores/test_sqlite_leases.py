"""Lease writes on the SQLite store go through the ledger writer's own connection.

A commit of another connection changes ``PRAGMA data_version`` for the writer, which then
drops every projection row it keeps and the runs it created stop being *owned* (each new
call id would cost a SELECT from then on). A lease is renewed every few seconds while calls
run, so its writes must not be such a commit; and once the store has failed on a storage
error, a lease write is refused like any other write.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.errors import StoreError
from charter.ledger.verify import verify_run
from charter.stores.leases import Lease
from charter.stores.sqlite import SQLiteStore
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created

pytestmark = pytest.mark.anyio

LEASE = Lease(
    owner_id="owner-1",
    host="h",
    pid=1,
    start="s",
    renewed_at="2026-12-02T00:00:00.000Z",
    expires_at="2026-12-02T00:00:30.000Z",
)


async def test_lease_writes_leave_the_writers_kept_rows_alone(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    async with SQLiteStore.open(tmp_path / "l.db", key=key) as store:
        await store.append("run-l", [run_created()])
        assert "run-l" in store._hot.owned
        await store.renew_lease(LEASE)
        await store.append("run-l", [ev("task_progress", n=1)])
        assert "run-l" in store._hot.owned  # no other connection committed meanwhile
        assert await store.read_leases(["owner-1"]) == {"owner-1": LEASE}
        await store.release_lease("owner-1")
        await store.append("run-l", [ev("task_progress", n=2)])
        assert "run-l" in store._hot.owned
        assert await store.read_leases(["owner-1"]) == {}
        report = await verify_run(store, "run-l", key)
        assert report.ok
        assert report.events == 3


async def test_a_commit_of_another_connection_does_drop_them(tmp_path: Path) -> None:
    """The check above can fail: a side write on a connection of its own is seen."""
    async with SQLiteStore.open(tmp_path / "o.db", key=fixed_ledger_key()) as store:
        await store.append("run-o", [run_created()])
        await store._chat_write(
            lambda c: c.execute(
                "INSERT INTO leases (owner_id, host, pid, start, renewed_at, expires_at) "
                "VALUES ('x', 'h', 1, 's', 'a', 'b')"
            )
        )
        await store.append("run-o", [ev("task_progress", n=1)])
        assert "run-o" not in store._hot.owned


async def test_a_failed_store_refuses_lease_writes(tmp_path: Path) -> None:
    async with SQLiteStore.open(tmp_path / "f.db", key=fixed_ledger_key()) as store:
        store.failure = "disk I/O error"  # what _fail_stop leaves after a storage error
        with pytest.raises(StoreError) as refused:
            await store.renew_lease(LEASE)
        assert refused.value.reason == "STORE_FAILED"
        store.failure = None
    with pytest.raises(StoreError) as closed:
        await store.renew_lease(LEASE)
    assert closed.value.reason == "STORE_CLOSED"
