"""The SQLite store's inline commits: a lone append commits on the loop's thread.

The whole store conformance suite runs with the ``inline`` probe always on, so every
promise of the store holds on that path too; the tests below pin when it is taken and when
the writer thread (and its group commit) takes over again.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.ledger.verify import verify_run
from charter.runtime import open_runtime
from charter.stores import sqlite as sqlite_module
from charter.stores.sqlite import SQLiteStore
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created
from charter.testing.store_conformance import StoreFactory
from tests.conformance import StoreSuite
from tests.kernel._project import write_runtime_project
from tests.stores.conftest import _check_kept_rows, sqlite_factory


class TestSQLiteStoreInline(StoreSuite):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return sqlite_factory(tmp_path, inline=lambda: True)


def _commit_threads(store: SQLiteStore) -> list[str]:
    """Record the name of the thread of every commit the store makes from now on."""
    seen: list[str] = []
    original = store._commit

    def spy(conn: Any, batch: Any, **how: Any) -> Any:
        seen.append(threading.current_thread().name)
        return original(conn, batch, **how)

    store._commit = spy  # type: ignore[method-assign]
    return seen


@pytest.mark.anyio
async def test_a_lone_append_commits_on_the_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_INLINE_MAX_S", 60.0)  # a loaded machine's fsync
    key = fixed_ledger_key()
    async with SQLiteStore.open(tmp_path / "i.db", key=key) as store:
        seen = _commit_threads(store)
        await store.append("run-i", [run_created()])  # no probe: the writer thread
        store.inline = lambda: True
        for n in range(3):
            await store.append("run-i", [ev("task_progress", n=n)])
        store.inline = lambda: False  # the probe says calls overlap
        await store.append("run-i", [ev("task_progress", n=3)])
        loop_thread = threading.current_thread().name
        writer = "charter-sqlite-writer"
        assert seen == [writer, loop_thread, loop_thread, loop_thread, writer]
        report = await verify_run(store, "run-i", key)
        assert report.ok
        assert report.events == 5


@pytest.mark.anyio
async def test_a_slow_inline_commit_sends_appends_to_the_writer_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_INLINE_MAX_S", 0.0)  # every commit is "slow"
    async with SQLiteStore.open(tmp_path / "s.db", key=fixed_ledger_key()) as store:
        store.inline = lambda: True
        seen = _commit_threads(store)
        await store.append("run-s", [run_created()])
        for n in range(5):
            await store.append("run-s", [ev("task_progress", n=n)])
        # five slow commits of five: from then on the writer thread
        assert seen == [threading.current_thread().name] * 5 + ["charter-sqlite-writer"]


@pytest.mark.anyio
async def test_concurrent_appends_still_group_commit_with_the_probe_on(tmp_path: Path) -> None:
    key = fixed_ledger_key()
    async with SQLiteStore.open(tmp_path / "g.db", key=key) as store:
        await store.append("run-g", [run_created()])
        busy = {"calls": 0}
        store.inline = lambda: busy["calls"] <= 1
        before = store.commits

        everyone_in = anyio.Event()

        async def one(i: int) -> None:
            busy["calls"] += 1  # 64 calls in flight at once, as the kernel counts them
            if busy["calls"] == 64:
                everyone_in.set()
            await everyone_in.wait()
            try:
                await store.append("run-g", [ev("task_progress", n=i)])
            finally:
                busy["calls"] -= 1

        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(one, i)
        assert 1 <= store.commits - before < 32
        report = await verify_run(store, "run-g", key)
        assert report.ok
        assert report.events == 65


@pytest.mark.anyio
async def test_the_runtime_commits_a_lone_call_inline_and_concurrent_calls_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through ``open_runtime``: one call at a time commits on the loop's thread; 20 calls
    at once overlap, so the writer thread group-commits them (fewer commits than appends)."""
    monkeypatch.setattr(sqlite_module, "_INLINE_MAX_S", 60.0)
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=f"sqlite:///{tmp_path / 'c.db'}") as rt:
        store = rt.store
        assert isinstance(store, SQLiteStore)
        assert store.inline is not None
        ctx = await rt.resolve_context("app", "all")
        seen = _commit_threads(store)
        envelope = await rt.call(ctx.context_id, "kv.get", "c-1", {"key": "a"}, as_="app")
        assert envelope.status == "succeeded", envelope
        assert seen
        assert set(seen) == {threading.current_thread().name}
        seen.clear()
        before = store.commits

        async def one(i: int) -> None:
            env = await rt.call(ctx.context_id, "kv.get", f"c-x{i}", {"key": "a"}, as_="app")
            assert env.status == "succeeded", env

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        assert store.commits - before < 40  # 2 appends per call; batches formed
        assert "charter-sqlite-writer" in seen
        assert store._hot.parsed  # the call, context and run rows the writer keeps parsed
        _check_kept_rows(store)  # and no handler changed one it read


@pytest.mark.anyio
async def test_one_slow_commit_does_not_pause_inline_commits_but_a_slow_disk_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL checkpoint (or a new file's first commits) makes one commit slow now and then;
    only a majority of slow commits among the last eight (a slow disk) sends appends to the
    writer thread."""
    now = [1000.0]

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return now[0]

    monkeypatch.setattr(sqlite_module, "time", Clock)
    async with SQLiteStore.open(tmp_path / "d.db", key=fixed_ledger_key()) as store:
        store.inline = lambda: True
        seen = _commit_threads(store)
        original = store._commit
        durations: list[float] = []

        def timed(conn: Any, batch: Any, **how: Any) -> Any:
            now[0] += durations.pop(0) if durations else 0.0
            return original(conn, batch, **how)

        store._commit = timed  # type: ignore[method-assign]
        loop_thread = threading.current_thread().name
        durations += [0.030, 0.0005, 0.0005]  # one very slow checkpoint among fast commits
        await store.append("run-d", [run_created()])
        for n in range(2):
            await store.append("run-d", [ev("task_progress", n=n)])
        assert seen == [loop_thread] * 3
        durations += [0.010] * 4  # the disk got slow
        for n in range(2, 8):
            await store.append("run-d", [ev("task_progress", n=n)])
        # five of the last seven slow at the seventh commit: from then on the writer thread
        assert seen == [loop_thread] * 7 + ["charter-sqlite-writer"] * 2


@pytest.mark.anyio
async def test_an_append_waits_for_another_process_lock_on_the_writer_not_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process (here: another connection) holds the write lock: the lone append
    does not busy-wait on the loop's thread (every request would stall for up to 10 s);
    it queues for the writer thread, and commits once the lock is free."""
    monkeypatch.setattr(sqlite_module, "_INLINE_MAX_S", 60.0)
    path = tmp_path / "l.db"
    async with SQLiteStore.open(path, key=fixed_ledger_key()) as store:
        await store.append("run-l", [run_created()])
        store.inline = lambda: True
        seen = _commit_threads(store)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            append = asyncio.ensure_future(store.append("run-l", [ev("task_progress", n=1)]))
            started = time.monotonic()
            await asyncio.sleep(0.3)
            assert time.monotonic() - started < 2.0  # the loop was not held
            assert not append.done()
            other.execute("COMMIT")
        finally:
            other.close()
        await append
        assert seen == ["charter-sqlite-writer"]
        store.inline = lambda: True  # the lock is free again: inline once more
        await store.append("run-l", [ev("task_progress", n=2)])
        assert seen == ["charter-sqlite-writer", threading.current_thread().name]
