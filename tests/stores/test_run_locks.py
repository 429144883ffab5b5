"""Per-run write locks: exclusive across processes (SQLite: flock) and replicas (PostgreSQL:
advisory locks); independent runs do not wait for each other."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from charter.stores.locks import FileRunLocks, LocalRunLocks
from charter.stores.postgres import PostgresStore
from charter.testing.clock import FakeClock
from charter.testing.ids import fixed_ledger_key

pytestmark = pytest.mark.anyio


async def test_local_locks_serialize_one_run_only() -> None:
    locks = LocalRunLocks()
    order: list[str] = []
    inside = asyncio.Event()

    async def first() -> None:
        async with locks.hold("run-a"):
            order.append("first-in")
            inside.set()
            async with locks.hold("run-b"):  # another run is not blocked
                order.append("other-run")
            await asyncio.sleep(0.05)
            order.append("first-out")

    async def second() -> None:
        await inside.wait()
        async with locks.hold("run-a"):
            order.append("second-in")

    await asyncio.gather(first(), second())
    assert order == ["first-in", "other-run", "first-out", "second-in"]


HOLDER = textwrap.dedent(
    """
    import fcntl, hashlib, os, sys, time
    path = sys.argv[1]
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(1.0)
    with open(sys.argv[2], "w") as fh:
        fh.write("released")
    fcntl.flock(fd, fcntl.LOCK_UN)
    """
)


async def test_file_locks_exclude_another_process(tmp_path: Path) -> None:
    locks = FileRunLocks(tmp_path / "locks")
    (tmp_path / "locks").mkdir()
    marker = tmp_path / "marker"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(locks._path("run-a")), str(marker)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        async with locks.hold("run-a"):
            # we only get here after the other process released the lock
            assert marker.read_text() == "released"
    finally:
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()


@pytest.mark.postgres
async def test_advisory_locks_exclude_another_replica(pg_url: str) -> None:
    key = fixed_ledger_key("locks")
    async with (
        PostgresStore.open(pg_url, key=key, clock=FakeClock()) as a,
        PostgresStore.open(pg_url, key=key, clock=FakeClock()) as b,
    ):
        order: list[str] = []
        held = asyncio.Event()

        async def replica_a() -> None:
            async with a.run_lock("run-a"):
                order.append("a-in")
                held.set()
                await asyncio.sleep(0.2)
                order.append("a-out")

        async def replica_b() -> None:
            await held.wait()
            async with b.run_lock("run-b"):
                order.append("b-other-run")
            async with b.run_lock("run-a"):
                order.append("b-in")

        await asyncio.gather(replica_a(), replica_b())
        assert order == ["a-in", "b-other-run", "a-out", "b-in"]
