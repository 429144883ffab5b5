"""Crash safety: SIGKILL a writer at random moments; every acknowledged append survives.

A subprocess appends to one run in a loop and prints each seq once its append returned
(committed). We kill it with SIGKILL at a random moment, 20 times; after every kill the run
must verify and hold every acknowledged seq.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from charter.ledger.chain import LedgerKey
from charter.ledger.verify import verify_run
from charter.stores.factory import open_store

ROOT = Path(__file__).resolve().parents[2]
KEY_HEX = "ab" * 32
KEY = LedgerKey("crash", bytes.fromhex(KEY_HEX))
KILLS = 20


def _inherited_path() -> list[str]:
    """The parent's PYTHONPATH, kept so the writer imports the same Charter as the test."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _kill_once(url: str, rng: random.Random) -> list[int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.stores.crash_writer", url, "run-crash", KEY_HEX],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *_inherited_path()])},
    )
    assert proc.stdout is not None
    acked: list[int] = []
    first = proc.stdout.readline()  # wait until it is appending
    assert first, "the writer died before its first append"
    acked.append(int(first))
    time.sleep(rng.uniform(0.0, 0.25))
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    proc.wait()
    proc.stdout.close()
    acked.extend(int(line) for line in rest.split())
    return acked


async def _check(url: str, acked: list[int]) -> None:
    async with open_store(url, key=KEY) as store:
        report = await verify_run(store, "run-crash", KEY)
        assert report.ok, report
        assert report.head_seq is not None
        assert max(acked) <= report.head_seq
        present: set[int] = set()
        after = 0
        while rows := await store.read_stored("run-crash", after=after, limit=5000):
            present.update(r.seq for r in rows)
            after = rows[-1].seq
        assert set(acked) <= present


def _crash_loop(url: str) -> None:
    rng = random.Random(1234)
    total: list[int] = []
    for _ in range(KILLS):
        acked = _kill_once(url, rng)
        total.extend(acked)
        anyio.run(_check, url, total)
    assert len(total) > KILLS


@pytest.mark.slow
def test_sqlite_survives_sigkill(tmp_path: Path) -> None:
    _crash_loop(f"sqlite:///{tmp_path / 'crash.db'}")


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_survives_sigkill(pg_url: str) -> None:
    _crash_loop(pg_url)
