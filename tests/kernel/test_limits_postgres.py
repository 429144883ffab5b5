"""Rate and concurrency limits hold across two replicas sharing PostgreSQL.

Each replica is a kernel with its own PostgreSQL store and its own limit state (its own
connection pool), as two ``charter serve`` processes would have; they share the database.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.kernel.envelope import Envelope
from charter.kernel.kernel import Kernel
from charter.kernel.limits import Limiter, LimitSettings, ProcessLimitState, Rate
from charter.stores.postgres import PostgresStore
from charter.stores.postgres_limits import PostgresLimitState
from charter.testing.clock import FakeClock
from tests.kernel.conftest import APP, BOB, KEY, make_kernel

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def pg_url() -> Iterator[str]:
    from tests.stores.conftest import create_database, drop_database

    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


@pytest.fixture
async def replicas(
    project: Path, pg_url: str, request: pytest.FixtureRequest
) -> AsyncIterator[list[Kernel]]:
    settings: LimitSettings = request.param
    clock = FakeClock(step=timedelta(0))
    async with AsyncExitStack() as stack:
        kernels = []
        for _ in range(2):
            store = await stack.enter_async_context(
                PostgresStore.open(pg_url, key=KEY, clock=clock)
            )
            state = await stack.enter_async_context(PostgresLimitState.open(pg_url))
            kernel = make_kernel(project, store, clock)
            kernel.limiter = Limiter(settings, state)
            kernels.append(kernel)
        yield kernels


async def flood(kernels: list[Kernel], who: Any, tool: str, args: Any, n: int) -> list[Envelope]:
    """``n`` calls at once, alternating between the replicas."""
    contexts = [(await k.resolve_context(who, "all")).context_id for k in kernels]
    out: list[Envelope] = []

    async def one(i: int) -> None:
        k = i % len(kernels)
        out.append(await kernels[k].call(contexts[k], tool, f"c{i}", args, principal=who))

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return out


def reasons(envelopes: list[Envelope]) -> dict[str | None, int]:
    found: dict[str | None, int] = {}
    for env in envelopes:
        reason = env.error["reason"] if env.error else None
        found[reason] = found.get(reason, 0) + 1
    return found


@pytest.mark.parametrize(
    "replicas", [LimitSettings(rate_principal=Rate(per_s=0.01, burst=6))], indirect=True
)
async def test_a_flood_split_across_two_replicas_is_cut_at_one_limit(
    replicas: list[Kernel],
) -> None:
    out = await flood(replicas, APP, "kv.get", {"key": "a"}, 30)
    assert reasons(out) == {None: 6, "RATE_LIMITED": 24}
    admitted_by = {e.context_id for e in out if e.error is None}
    assert len(admitted_by) == 2  # both replicas admitted some: the bucket is shared
    assert reasons(await flood(replicas, BOB, "kv.get", {"key": "a"}, 4)) == {None: 4}


@pytest.mark.parametrize("replicas", [LimitSettings(concurrency_principal=2)], indirect=True)
async def test_calls_in_flight_are_capped_across_two_replicas(replicas: list[Kernel]) -> None:
    out = await flood(replicas, APP, "kv.slow", {"seconds": 0.5}, 6)
    assert reasons(out) == {None: 2, "CONCURRENCY_LIMITED": 4}
    assert reasons(await flood(replicas, APP, "kv.get", {"key": "a"}, 2)) == {None: 2}


@pytest.mark.parametrize(
    "replicas", [LimitSettings(concurrency_principal=1, lease_s=0.2)], indirect=True
)
async def test_a_slot_held_by_a_lost_replica_is_freed_by_its_lease(
    replicas: list[Kernel], pg_url: str
) -> None:
    limiter = replicas[0].limiter
    assert limiter is not None
    lost = await limiter.admit(APP, None, "slot-of-a-dead-process")  # never released
    assert not isinstance(lost, Exception)
    assert reasons(await flood(replicas[1:], APP, "kv.get", {"key": "a"}, 1)) == {
        "CONCURRENCY_LIMITED": 1
    }
    await anyio.sleep(0.3)
    assert reasons(await flood(replicas[1:], APP, "kv.get", {"key": "a"}, 1)) == {None: 1}


async def test_the_cost_of_the_shared_state(pg_url: str) -> None:
    """Not a timed test: prints the per-decision cost (docs/deploy.md quotes it) beside a bare
    ``SELECT 1`` on the same pool, all interleaved sample by sample."""
    big = Rate(per_s=1e6, burst=1_000_000)
    rate_only = LimitSettings(rate_principal=big, rate_tenant=big)
    with_slots = LimitSettings(rate_principal=big, rate_tenant=big, concurrency_principal=1000)
    samples: dict[str, list[float]] = {}
    async with PostgresLimitState.open(pg_url) as pg:
        contenders = {
            "process, rate + slot": Limiter(with_slots, ProcessLimitState()),
            "postgres, rate": Limiter(rate_only, pg),
            "postgres, rate + slot": Limiter(with_slots, pg),
        }
        for i in range(300):
            started = time.perf_counter()
            async with pg._pool.connection() as conn:
                await conn.execute("SELECT 1")
            samples.setdefault("postgres, bare SELECT 1", []).append(time.perf_counter() - started)
            for name, limiter in contenders.items():
                started = time.perf_counter()
                admission = await limiter.admit(APP, None, f"s{i}")
                assert not isinstance(admission, Exception)
                await admission.release()
                samples.setdefault(name, []).append(time.perf_counter() - started)
    for name, values in samples.items():
        print(f"\n{name}: median {statistics.median(values) * 1e6:.0f} µs")
    assert all(values for values in samples.values())


async def test_two_runtimes_on_postgresql_share_the_deployment_limits(
    tmp_path: Path, pg_url: str
) -> None:
    from charter.runtime import open_runtime
    from tests.kernel._project import write_runtime_project

    root = write_runtime_project(tmp_path / "proj")
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text() + "limits:\n  rate:\n    tenant: {per_s: 0.01, burst: 4}\n"
    )
    async with (
        open_runtime(root, store=pg_url) as one,
        open_runtime(root, store=pg_url) as two,
    ):
        assert isinstance(one.kernel.limiter.state, PostgresLimitState)  # type: ignore[union-attr]
        answers = []
        for i in range(4):
            for rt in (one, two):
                ctx = (await rt.resolve_context("app", "all")).context_id
                answers.append(await rt.call(ctx, "kv.get", f"r{i}", {"key": "a"}, as_="app"))
    assert reasons(answers) == {None: 4, "RATE_LIMITED": 4}


@pytest.mark.parametrize("replicas", [LimitSettings(concurrency_principal=1)], indirect=True)
async def test_a_cancelled_call_frees_its_slot_in_postgresql(
    replicas: list[Kernel], pg_url: str
) -> None:
    import psycopg

    kernel = replicas[0]
    ctx = (await kernel.resolve_context(APP, "all")).context_id
    with anyio.move_on_after(0.3):
        await kernel.call(ctx, "kv.slow", "gone", {"seconds": 1.0}, principal=APP)
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        cur = await conn.execute("SELECT count(*) FROM charter_inflight")
        assert await cur.fetchone() == (0,)
    assert reasons(await flood(replicas[1:], APP, "kv.get", {"key": "a"}, 1)) == {None: 1}


@pytest.mark.parametrize("replicas", [LimitSettings(concurrency_principal=4)], indirect=True)
async def test_a_slot_is_leased_for_the_tools_timeout_and_grace(
    replicas: list[Kernel], pg_url: str
) -> None:
    import psycopg

    kernel = replicas[0]
    ctx = (await kernel.resolve_context(APP, "all")).context_id
    left: list[float] = []

    async def look() -> None:
        await anyio.sleep(0.2)
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cur = await conn.execute(
                "SELECT expires_at - extract(epoch FROM clock_timestamp()) FROM charter_inflight"
            )
            left.extend(float(row[0]) for row in await cur.fetchall())

    async with anyio.create_task_group() as tg:
        tg.start_soon(look)
        await kernel.call(ctx, "kv.slow", "leased", {"seconds": 0.6}, principal=APP)
    # kv.slow: timeout_s 30, + the 30 s coalescing grace + 60 s
    assert len(left) == 1
    assert 100 < left[0] <= 120
