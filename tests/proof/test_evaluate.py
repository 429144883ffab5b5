"""The replay evaluator: findings for milestones, roles, tools, preflight, duplicates,
artifact types and terminal status, on the report-pipeline run and edited copies of it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from charter.cli.pipeline_demo import run_report_pipeline
from charter.proof.evaluate import evaluate_events, evaluate_run
from charter.proof.replay import read_events
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

pytestmark = pytest.mark.anyio

Events = list[dict[str, Any]]
AGENTS = frozenset({"retriever", "analyst", "writer"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def recorded(tmp_path: Path) -> tuple[str, Events]:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        result = await run_report_pipeline(rt)
        assert (await evaluate_run(rt.store, result.run_id, agents=AGENTS)).ok
        return result.run_id, await read_events(rt.store, result.run_id)


def edited(events: Events, change: Callable[[Events], None]) -> Events:
    out = copy.deepcopy(events)
    change(out)
    return out


def started(events: Events, tool: str) -> dict[str, Any]:
    return next(
        e
        for e in events
        if e["type"] == "tool_progress"
        and e["payload"].get("stage") == "started"
        and e["payload"]["tool_id"] == tool
    )


async def test_a_completed_run_has_no_findings(recorded: tuple[str, Events]) -> None:
    run_id, events = recorded
    ev = evaluate_events(run_id, events, agents=AGENTS)
    assert (ev.ok, ev.workflow, ev.status) == (True, "quarterly-report", "completed")


async def test_a_partial_run_misses_a_milestone_and_its_terminal_status(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        result = await run_report_pipeline(rt, skip_calls={"report"})
        ev = await evaluate_run(rt.store, result.run_id, agents=AGENTS)
    assert ev.kinds() == ["milestone_missing", "terminal_status"]
    assert ev.findings[0].task_id == "report"
    assert ev.findings[1].message == "the run ended partial"


async def test_an_unfinished_run(recorded: tuple[str, Events]) -> None:
    run_id, events = recorded
    ev = evaluate_events(run_id, events[:-1], agents=AGENTS)
    assert ev.kinds() == ["terminal_status"]
    assert ev.findings[0].message == "the run is still running"


async def test_role_profile_and_tool_findings(recorded: tuple[str, Events]) -> None:
    run_id, events = recorded

    def other_agent(evs: Events) -> None:
        ctx_id = started(evs, "stats.summarise")["payload"]["context_id"]
        for e in evs:
            if e["type"] == "context_resolved" and e["payload"]["context_id"] == ctx_id:
                e["payload"]["agent"] = "writer"
                e["payload"]["profile"] = "reporting"

    ev = evaluate_events(run_id, edited(events, other_agent), agents=AGENTS)
    assert ev.kinds() == ["role_mismatch", "profile_mismatch"]
    assert {f.task_id for f in ev.findings} == {"analyse"}

    def other_tool(evs: Events) -> None:
        started(evs, "stats.summarise")["payload"]["tool_id"] = "report.write"

    ev = evaluate_events(run_id, edited(events, other_tool), agents=AGENTS)
    assert ev.kinds() == ["tool_outside_task"]


async def test_preflight_order(recorded: tuple[str, Events]) -> None:
    run_id, events = recorded

    def fetch_never_succeeds(evs: Events) -> None:
        intent = started(evs, "data.fetch")["payload"]
        evs[:] = [
            e
            for e in evs
            if not (
                e["type"] == "tool_progress"
                and e["payload"].get("stage") == "completed"
                and e["payload"]["call_id"] == intent["call_id"]
            )
        ]

    ev = evaluate_events(run_id, edited(events, fetch_never_succeeds), agents=AGENTS)
    assert ev.kinds() == ["preflight_order", "preflight_order"]
    assert "before preflight data.fetch" in ev.findings[0].message


async def test_duplicate_successful_calls(recorded: tuple[str, Events]) -> None:
    run_id, events = recorded

    def twice(evs: Events) -> None:
        intent = started(evs, "data.fetch")
        done = next(
            e
            for e in evs
            if e["type"] == "tool_progress"
            and e["payload"].get("stage") == "completed"
            and e["payload"]["call_id"] == intent["payload"]["call_id"]
        )
        again = [copy.deepcopy(intent), copy.deepcopy(done)]
        for e in again:
            e["payload"]["call_id"] = "retrieve-2"
        at = evs.index(done) + 1
        evs[at:at] = again

    ev = evaluate_events(run_id, edited(events, twice), agents=AGENTS)
    assert ev.kinds() == ["duplicate_success"]
    assert ev.findings[0].call_id == "retrieve-2"


async def test_artifact_types(recorded: tuple[str, Events]) -> None:
    run_id, events = recorded

    def retype(new: str) -> Callable[[Events], None]:
        def change(evs: Events) -> None:
            for e in evs:
                if e["type"] == "artifact_registered" and e["payload"]["type"] == "summary":
                    e["payload"]["type"] = new

        return change

    ev = evaluate_events(run_id, edited(events, retype("secrets")), agents=AGENTS)
    assert ev.kinds() == ["artifact_type_unexpected"]
    assert "not declared" in ev.findings[0].message
    ev = evaluate_events(run_id, edited(events, retype("report")), agents=AGENTS)
    assert ev.kinds() == ["artifact_type_unexpected"]
    assert "task analyse registered report" in ev.findings[0].message
