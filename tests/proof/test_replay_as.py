"""Replay as someone: the deployment's principals and enablement, or loud assumptions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from charter.kernel.authorize import Enablement
from charter.proof.replay import replay_run
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import ALICE, KEY, Env, make_kernel, write_project

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    project = write_project(tmp_path / "kv")
    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock)
    return Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)


async def record(env: Env) -> str:
    ctx = await env.kernel.resolve_context(ALICE, "writers")
    k = env.kernel
    got = await k.call(ctx.context_id, "kv.get", "r1", {"key": "a"}, principal=ALICE)
    assert got.status == "succeeded"
    put = {"key": "a", "value": "v"}
    got = await k.call(ctx.context_id, "kv.put", "w1", put, principal=ALICE)
    assert got.status == "pending_approval"
    return ctx.run_id


async def test_without_a_deployment_every_assumption_is_named(env: Env) -> None:
    run_id = await record(env)
    report = await replay_run(env.store, run_id, env.build)
    assert report.changed == ()
    assert report.assumptions == ("permissions", "enablement")
    assert report.assumed_principals == ("alice",)
    by_call = {c.call_id: c.assumed for c in report.calls}
    # The read needs kv:read (assumed held); the write needs kv:write and enablement by name.
    assert by_call == {"r1": ("permissions",), "w1": ("permissions", "enablement")}
    out = report.to_dict()
    assert out["depends_on_assumption"] == ["r1", "w1"]
    assert out["assumed_enablement"] is True


async def test_as_the_deployment_nothing_is_assumed(env: Env) -> None:
    run_id = await record(env)
    report = await replay_run(
        env.store,
        run_id,
        env.build,
        principals={"alice": ALICE},
        enablement=Enablement(enabled=frozenset({"kv.put"})),
    )
    assert report.assumptions == ()
    assert report.depends_on_assumption == ()
    assert report.changed == ()


async def test_the_deployment_decides_what_would_change(env: Env) -> None:
    run_id = await record(env)
    # Today's deployment: alice lost kv:write, and kv.put is no longer enabled.
    reader = replace(ALICE, permissions=frozenset({"kv:read"}))
    report = await replay_run(
        env.store, run_id, env.build, principals={"alice": reader}, enablement=Enablement()
    )
    assert report.assumptions == ()
    assert [(c.call_id, c.recorded, c.replayed) for c in report.changed] == [
        ("w1", "pending_approval", "denied")
    ]
    # Enablement known, principal not in the deployment: only permissions are assumed.
    report = await replay_run(
        env.store,
        run_id,
        env.build,
        principals={},
        enablement=Enablement(enabled=frozenset({"kv.put"})),
    )
    assert report.assumptions == ("permissions",)
    assert {c.call_id: c.assumed for c in report.calls} == {
        "r1": ("permissions",),
        "w1": ("permissions",),
    }
