"""The consumers' fast paths for the events a verified replay hands over (``take``) give what
their general paths give (``add``, one event document at a time), on recorded runs and on
events edited to the shapes the fast paths must not pass over."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from charter.proof.evaluate import Evaluator
from charter.proof.replay import Replay, read_events, replay_events
from tests.kernel.conftest import Env
from tests.proof.test_replay import env, record_run

pytestmark = pytest.mark.anyio
__all__ = ["env"]  # the fixture, imported for these tests


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# What a tool_progress stage or a tool_call_recorded outcome may hold in a ledger.
_ODD = ["started", "completed", "retrying", "denied", "rejected", "succeeded", None, 1, ["denied"]]


def _variants(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's events, then each call event again under another call id with every odd
    stage or outcome (a fresh call id: its first decision is replayed)."""
    out = list(events)
    for n, ev in enumerate(events):
        field = {"tool_progress": "stage", "tool_call_recorded": "outcome"}.get(ev["type"])
        if field is None:
            continue
        for k, value in enumerate(_ODD):
            edited = copy.deepcopy(ev)
            edited["seq"] = len(out) + 1
            edited["payload"][field] = value
            edited["payload"]["call_id"] = f"odd-{n}-{k}"
            out.append(edited)
    return out


def _taken(run_id: str, events: list[dict[str, Any]], env: Env) -> Any:
    replay = Replay(run_id, env.build)
    for ev in events:
        replay.take(ev["type"], ev["payload"], ev["seq"])
    return replay.report()


async def test_replay_take_is_replay_add(env: Env) -> None:
    run_id = await record_run(env)
    events = _variants(await read_events(env.store, run_id))
    general = replay_events(run_id, events, env.build)
    assert _taken(run_id, events, env) == general
    recorded = {c.recorded for c in general.calls}
    assert {"allowed", "denied", "rejected"} <= recorded  # the variants reached every kind


@pytest.mark.parametrize("stage", ["started", "completed"])
async def test_evaluator_take_refuses_an_unhashable_id_before_recording(
    env: Env, stage: str
) -> None:
    # ids are hashed up front only when they are not str: the check must still run for them
    run_id = await record_run(env)
    events = await read_events(env.store, run_id)
    start = next(e for e in events if e["payload"].get("stage") == "started")
    evaluator = Evaluator(run_id)
    payload = {**start["payload"], "stage": stage, "call_id": ["unhashable"]}
    with pytest.raises(TypeError):
        evaluator.take("tool_progress", payload, 1)
    assert evaluator.intents == {}
