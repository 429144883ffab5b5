"""A verified replay feeds replay and evaluation as it verifies: same results, same errors."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.ledger.verify import read_verified, visit_verified
from charter.project.build import Build, build_project
from charter.proof.evaluate import Evaluator, evaluate_events
from charter.proof.replay import Replay, replay_events
from charter.proof.verified import _Feed, replay_verified
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.kernel.conftest import ALICE, KEY, make_kernel, write_project

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _recorded(tmp_path: Path) -> tuple[MemoryStore, str, Build]:
    project = write_project(tmp_path / "kv")
    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    kernel = make_kernel(project, store, clock)
    ctx = await kernel.resolve_context(ALICE, "readers")
    for i, (tool, args) in enumerate(
        [("kv.get", {"key": "a"}), ("kv.put", {"key": "b", "value": "v"}), ("kv.get", {})]
    ):
        await kernel.call(ctx.context_id, tool, f"c{i}", args, principal=ALICE)
    return store, ctx.run_id, build_project(project)


async def test_the_streamed_replay_is_the_replay_of_the_verified_events(tmp_path: Path) -> None:
    store, run_id, build = await _recorded(tmp_path)
    got = await replay_verified(store, run_id, build, KEY, agents=frozenset({"x"}))
    events = (await read_verified(store, run_id, KEY)).events
    assert got.ok
    assert got.replay == replay_events(run_id, events, build)
    assert got.evaluation == evaluate_events(run_id, events, agents=frozenset({"x"}))
    assert got.replay is not None
    assert [c.call_id for c in got.replay.calls] == ["c0", "c1", "c2"]
    assert got.replay.events == len(events)


async def test_visit_verified_sees_each_event_once_in_order(tmp_path: Path) -> None:
    store, run_id, _ = await _recorded(tmp_path)
    seen: list[dict[str, Any]] = []
    report = await visit_verified(store, run_id, KEY, seen.append)
    assert report.ok
    assert [e["seq"] for e in seen] == list(range(1, report.events + 1))
    assert seen == list((await read_verified(store, run_id, KEY)).events)


async def test_a_replay_error_surfaces_once_the_ledger_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id, build = await _recorded(tmp_path)
    original = Replay.take

    def failing(self: Replay, typ: Any, payload: Any, seq: Any) -> None:
        if seq == 5:
            raise RuntimeError("replay broke")
        original(self, typ, payload, seq)

    monkeypatch.setattr(Replay, "take", failing)
    with pytest.raises(RuntimeError, match="replay broke"):
        await replay_verified(store, run_id, build, KEY)
    # The same ledger failing verification further on gives its report, not the error.
    last = max(store.seqs[run_id])
    del store.events[(run_id, last)]
    got = await replay_verified(store, run_id, build, KEY)
    assert (got.ok, got.verify.reason, got.replay) == (False, "LEDGER_HEAD_MISMATCH", None)


async def test_replay_errors_win_over_evaluation_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id, build = await _recorded(tmp_path)
    replay_take, evaluate_take = Replay.take, Evaluator.take

    def late_replay(self: Replay, typ: Any, payload: Any, seq: Any) -> None:
        if seq == 6:
            raise RuntimeError("replay")
        replay_take(self, typ, payload, seq)

    def early_evaluation(self: Evaluator, typ: Any, payload: Any, seq: Any) -> None:
        if seq == 2:
            raise RuntimeError("evaluation")
        evaluate_take(self, typ, payload, seq)

    monkeypatch.setattr(Evaluator, "take", early_evaluation)
    with pytest.raises(RuntimeError, match="evaluation"):
        await replay_verified(store, run_id, build, KEY)
    monkeypatch.setattr(Replay, "take", late_replay)
    with pytest.raises(RuntimeError, match="replay"):
        await replay_verified(store, run_id, build, KEY)


def test_feed_stops_feeding_a_consumer_that_raised() -> None:
    got: list[int] = []

    def flaky(typ: Any, payload: Any, seq: Any) -> None:
        if seq == 2:
            raise ValueError("two")
        got.append(seq)

    others: list[int] = []
    feed = _Feed(flaky, lambda typ, payload, seq: others.append(seq))
    for n in range(1, 5):
        feed("tool_progress", {}, n)
    assert got == [1]
    assert others == [1, 2, 3, 4]
    assert isinstance(feed.replay_error, ValueError)
    assert feed.evaluation_error is None
