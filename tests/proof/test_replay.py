"""Replay against the pinned and a candidate Build: exactly the calls that change; no dispatch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from charter.project.build import build_project
from charter.proof.replay import replay_run
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import ALICE, BOB, KEY, Env, make_kernel, write_project

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


async def record_run(env: Env) -> str:
    ctx = await env.kernel.resolve_context(ALICE, "readers")
    k = env.kernel
    assert (
        await k.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=ALICE)
    ).status == "succeeded"
    assert (
        await k.call(ctx.context_id, "kv.echo", "c2", {"payload": {}}, principal=ALICE)
    ).status == "succeeded"
    assert (
        await k.call(ctx.context_id, "kv.get", "c3", {"key": "b"}, principal=ALICE)
    ).status == "succeeded"
    assert (
        await k.call(ctx.context_id, "kv.put", "c4", {"key": "b", "value": "v"}, principal=ALICE)
    ).status == "denied"
    assert (
        await k.call(ctx.context_id, "kv.get", "c5", {"nope": 1}, principal=ALICE)
    ).status == "rejected"
    return ctx.run_id


async def test_replay_against_the_pinned_build_changes_nothing(env: Env) -> None:
    run_id = await record_run(env)
    report = await replay_run(env.store, run_id, env.build)
    assert [c.call_id for c in report.calls] == ["c1", "c2", "c3", "c4", "c5"]
    assert report.changed == ()


async def test_a_candidate_dropping_a_tool_reports_exactly_those_calls(env: Env) -> None:
    run_id = await record_run(env)
    journal_before = env.journal()
    assert len(journal_before) == 2  # kv.get ran twice (kv.echo does not journal)
    yaml = (env.project / "charter.yaml").read_text()
    (env.project / "charter.yaml").write_text(
        yaml.replace("readers:\n    include: [kv.get, kv.echo]", "readers:\n    include: [kv.echo]")
    )
    candidate = build_project(env.project)
    assert candidate.digest != env.build.digest
    report = await replay_run(env.store, run_id, candidate)
    assert [c.call_id for c in report.now_denied] == ["c1", "c3"]
    assert {c.reason for c in report.now_denied} == {"TOOL_NOT_DISCLOSED"}
    assert [c.call_id for c in report.changed] == ["c1", "c3", "c5"]
    # the executor journal shows that replay dispatched nothing
    assert env.journal() == journal_before


async def test_a_candidate_requiring_approval_and_limits(env: Env) -> None:
    ctx = await env.kernel.resolve_context(BOB, "all")
    for i in range(3):
        await env.kernel.call(ctx.context_id, "kv.limited", f"l{i}", {"n": i}, principal=BOB)
    report = await replay_run(env.store, ctx.run_id, env.build)
    assert [(c.call_id, c.recorded, c.replayed) for c in report.calls] == [
        ("l0", "allowed", "allowed"),
        ("l1", "allowed", "allowed"),
        ("l2", "denied", "denied"),
    ]
    assert report.changed == ()
