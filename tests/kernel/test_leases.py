"""Owner leases: a call left ``dispatching`` by a process that is gone is reconciled by any
other process sharing the store, exactly once, as ``unknown``.

Before: ``reconcile()`` ran only when a runtime opened, skipped every call whose owner was on
another host ("its own restart reconciles it"), and a live process never looked again — so a
replica that died on another machine left its calls ``dispatching`` for good.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.ledger.events import NewEvent, format_at
from charter.ledger.verify import verify_run
from charter.runtime import ledger_key_for, open_runtime
from charter.stores.leases import Lease
from tests.kernel._project import runs_of, write_runtime_project
from tests.kernel.conftest import APP, Env, make_kernel

pytestmark = pytest.mark.anyio

DRIVER = Path(__file__).with_name("_driver.py")


async def stranded_call(env: Env, *, lease_for_s: float | None) -> tuple[str, str]:
    """A call another host's process left ``dispatching``, with its lease (or none)."""
    ctx = await env.kernel.resolve_context(APP, "all")
    owner = {"host": "replica-elsewhere", "pid": 1, "start": "1", "lease": "own-elsewhere"}
    if lease_for_s is not None:
        now = env.clock()
        await env.store.renew_lease(
            Lease(
                owner_id="own-elsewhere",
                host="replica-elsewhere",
                pid=1,
                start="1",
                renewed_at=format_at(now),
                expires_at=format_at(now + timedelta(seconds=lease_for_s)),
            )
        )
    await env.store.append(
        ctx.run_id,
        [
            NewEvent(
                type="tool_progress",
                payload={
                    "stage": "started",
                    "context_id": ctx.context_id,
                    "call_id": "s1",
                    "tool_id": "kv.get",
                    "fingerprint": "hmac-sha256:fp-test:00",
                    "tenant": "acme",
                    "owner": owner,
                },
            )
        ],
    )
    return ctx.context_id, ctx.run_id


async def test_another_hosts_call_waits_while_its_lease_lives(env: Env) -> None:
    cid, _ = await stranded_call(env, lease_for_s=30)
    assert await env.kernel.reconcile() == []
    env.clock.advance(timedelta(seconds=29))
    assert await env.kernel.reconcile() == []
    assert _attr(await env.kernel.get_call(cid, "s1", "acme"), "state") == "dispatching"
    env.clock.advance(timedelta(seconds=1))
    [done] = await env.kernel.reconcile()
    assert done.call_id == "s1"
    row = await env.kernel.get_call(cid, "s1", "acme")
    assert row is not None
    assert row.state == "unknown"
    assert row.receipt["error"]["reason"] == "DISPATCH_INTERRUPTED"
    # a second process finds nothing left to do
    other = make_kernel(env.project, env.store, env.clock)
    assert await other.reconcile() == []


async def test_a_lease_edited_to_live_for_days_does_not_keep_a_call_in_flight(env: Env) -> None:
    """The leases table carries no MAC: a lease whose expiry was moved far into the future
    (by hand, outside Charter) counts as lapsed — no process renews for longer than an hour —
    so the dead owner's call is reconciled instead of staying ``dispatching`` for good."""
    cid, _ = await stranded_call(env, lease_for_s=3 * 86400)
    [done] = await env.kernel.reconcile()
    assert done.call_id == "s1"
    assert _attr(await env.kernel.get_call(cid, "s1", "acme"), "state") == "unknown"


async def test_a_lease_within_the_longest_lifetime_is_believed(env: Env) -> None:
    cid, _ = await stranded_call(env, lease_for_s=50 * 60)
    assert await env.kernel.reconcile() == []
    assert _attr(await env.kernel.get_call(cid, "s1", "acme"), "state") == "dispatching"


@pytest.fixture
async def pg_env(project: Path, pg_store_url: str) -> AsyncIterator[Env]:
    from charter.stores.postgres import PostgresStore
    from charter.testing.clock import FakeClock
    from tests.kernel.conftest import KEY

    clock = FakeClock(step=timedelta(0))
    async with PostgresStore.open(pg_store_url, key=KEY, clock=clock) as store:
        kernel = make_kernel(project, store, clock)
        yield Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("lease_for_s", "state"), [(3 * 86400, "unknown"), (50 * 60, "dispatching")]
)
async def test_the_longest_lease_bound_holds_on_postgresql(
    pg_env: Env, lease_for_s: int, state: str
) -> None:
    """The same bound with the lease read back from PostgreSQL's ``leases`` table: an expiry
    three days ahead counts as lapsed (the call is reconciled), fifty minutes ahead is
    believed (the call stays in flight)."""
    cid, _ = await stranded_call(pg_env, lease_for_s=lease_for_s)
    await pg_env.kernel.reconcile()
    assert _attr(await pg_env.kernel.get_call(cid, "s1", "acme"), "state") == state


async def test_a_call_whose_owner_holds_no_lease_is_reconciled(env: Env) -> None:
    """A released lease (clean shutdown) or none at all: the owner is gone."""
    cid, _ = await stranded_call(env, lease_for_s=None)
    assert len(await env.kernel.reconcile()) == 1
    assert _attr(await env.kernel.get_call(cid, "s1", "acme"), "state") == "unknown"


async def test_a_live_process_keeps_its_lease_and_releases_it(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    out = await env.kernel.call(ctx.context_id, "kv.get", "g1", {"key": "a"}, principal=APP)
    assert out.ok
    owner_id = env.kernel.lease.owner_id
    [lease] = (await env.store.read_leases([owner_id])).values()
    assert lease.pid == os.getpid()
    assert lease.expires_at > format_at(env.clock.now)
    await env.kernel.lease.aclose()
    assert await env.store.read_leases([owner_id]) == {}


# ---------------------------------------------------------------------------------------
# two real processes sharing a store; one is killed with SIGKILL


@pytest.fixture
def pg_store_url() -> Iterator[str]:
    from tests.stores.conftest import create_database, drop_database

    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "KV_"))}


def _wait(predicate: Any, what: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"a driver died while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


async def _dead_replica(tmp_path: Path, store: str) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
    call = {
        "op": "call",
        "context": ctx.context_id,
        "tool": "kv.slow",
        "call_id": "c1",
        "args": {"seconds": 25},
        "as": "app",
    }
    until = {"op": "reconcile_until", "context": ctx.context_id, "call_id": "c1", "as": "app"}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    survivors_spec = {
        "project": str(project),
        "store": store,
        "steps": [until],
        "fork": 2,
        "ready": str(barrier / "ready"),
        "go": str(barrier / "go"),
        "out": str(barrier / "out"),
    }
    # Two survivors open the store first (their start-up reconciliation finds nothing).
    survivors = subprocess.Popen(
        [sys.executable, str(DRIVER), json.dumps(survivors_spec)],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    # The replica that dies poses as another host, so only its lease can tell it is gone.
    doomed_spec = {
        "project": str(project),
        "store": store,
        "steps": [call],
        "as_host": "replica-b.example",
        "lease_ttl_s": 1.5,
    }
    log = (tmp_path / "doomed.log").open("w")
    doomed = subprocess.Popen(
        [sys.executable, str(DRIVER), json.dumps(doomed_spec)],
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
        env=_env(),
    )
    try:
        for i in range(2):
            _wait(lambda i=i: (barrier / f"ready-{i}").exists(), "the survivors", survivors)
        _wait(lambda: runs_of(project, "kv.slow") == 1, "the tool to start", doomed)
        os.kill(doomed.pid, signal.SIGKILL)
        assert doomed.wait(timeout=30) == -signal.SIGKILL
        (barrier / "go").touch()
        _, err = survivors.communicate(timeout=120)
        assert survivors.returncode == 0, err
    finally:
        for proc in (doomed, survivors):
            with contextlib.suppress(ProcessLookupError):
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
        log.close()
    results = [json.loads((barrier / f"out-{i}.json").read_text())["results"][0] for i in (0, 1)]
    assert {r["state"] for r in results} == {"unknown"}, results
    assert sum(r["changed"] for r in results) == 1, results  # reconciled once, by one of them
    async with open_runtime(project, store=store) as rt:
        row = await rt.get_call(ctx.context_id, "c1", as_="app")
        assert row.state == "unknown"
        assert row.receipt["error"]["reason"] == "DISPATCH_INTERRUPTED"
        events = [json.loads(e.data) for e in await rt.store.read_stored(ctx.run_id)]
        unknown = [
            e
            for e in events
            if e["type"] == "tool_progress" and e["payload"].get("stage") == "unknown"
        ]
        assert len(unknown) == 1
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project))
        assert report.ok, report.to_dict()
    assert runs_of(project, "kv.slow") == 1  # nothing ran it again


@pytest.mark.slow
async def test_a_dead_replica_is_reconciled_once_on_sqlite(tmp_path: Path) -> None:
    await _dead_replica(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}")


@pytest.mark.slow
@pytest.mark.postgres
async def test_a_dead_replica_is_reconciled_once_on_postgresql(
    tmp_path: Path, pg_store_url: str
) -> None:
    await _dead_replica(tmp_path, pg_store_url)


def _attr(view: Any, name: str) -> Any:
    assert view is not None
    return getattr(view, name)
