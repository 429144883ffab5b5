"""Reading after a sequence number the run has not reached is no damage: nothing to read
yet (a follower waits for it); only an event missing at or below the head is a gap."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from charter.errors import LedgerIntegrityError
from charter.ledger.chain import LedgerKey
from charter.ledger.subscribe import read_events, subscribe
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import SAMPLE_RUN, ev, record_sample_run, run_created

pytestmark = pytest.mark.anyio
KEY = LedgerKey("test", b"k" * 32)


async def test_after_past_the_head_reads_nothing(tmp_path: Path) -> None:
    async with SQLiteStore.open(tmp_path / "c.db", key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
        n = len(SAMPLE_RUN)
        assert await read_events(store, "run-1", after=n + 1) == []
        assert await read_events(store, "run-1", after=100_000) == []
        assert [e.seq for e in await read_events(store, "run-1", after=n - 1)] == [n]


async def test_a_follower_past_the_head_continues_once_the_run_gets_there(
    tmp_path: Path,
) -> None:
    async with SQLiteStore.open(tmp_path / "c.db", key=KEY, clock=FakeClock()) as store:
        await store.append("run-w", [run_created(), ev("task_progress", n=1)])
        seen: list[int] = []

        async def follow() -> None:
            async for event in subscribe(store, "run-w", after=4, poll_s=0.05):
                seen.append(event.seq)
                if event.seq == 6:
                    return

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                for n in range(2, 6):
                    await anyio.sleep(0.02)
                    await store.append("run-w", [ev("task_progress", n=n)])
        assert seen == [5, 6]  # strictly after 4, chained from the stored event 4


@pytest.mark.parametrize("missing", [3, "head"])
async def test_an_event_missing_at_or_below_the_head_is_still_a_gap(
    tmp_path: Path, missing: int | str
) -> None:
    path = tmp_path / "c.db"
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
    seq = len(SAMPLE_RUN) if missing == "head" else missing
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DELETE FROM events WHERE seq = ?", (seq,))
    conn.close()
    async with SQLiteStore.open(path, key=KEY, clock=FakeClock()) as store:
        with pytest.raises(LedgerIntegrityError) as info:
            await read_events(store, "run-1", after=int(seq))
        assert (info.value.reason, info.value.seq) == ("LEDGER_GAP", seq)


async def test_a_negative_cursor_or_empty_limit_is_the_callers_mistake_not_a_gap(
    tmp_path: Path,
) -> None:
    """``after=-5`` read as "event -5 is missing" (``LEDGER_GAP``: damage, for a caller's
    typo) and ``limit=0`` returned one event; both are ``InvalidInput`` now."""
    from charter.errors import InvalidInput

    async with SQLiteStore.open(tmp_path / "c.db", key=KEY, clock=FakeClock()) as store:
        await record_sample_run(store, "run-1")
        for after in (-5, -1, "3", 1.5, True):
            with pytest.raises(InvalidInput) as info:
                await read_events(store, "run-1", after=after)  # type: ignore[arg-type]
            assert info.value.reason == "CURSOR_INVALID"
            with pytest.raises(InvalidInput):
                async for _ in subscribe(store, "run-1", after=after, follow=False):  # type: ignore[arg-type]
                    pass
        for limit in (0, -1, True):
            with pytest.raises(InvalidInput) as info:
                await read_events(store, "run-1", limit=limit)
            assert info.value.reason == "LIMIT_INVALID"
        assert [e.seq for e in await read_events(store, "run-1", limit=1)] == [1]
