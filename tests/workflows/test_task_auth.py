"""Task-scoped authorization in the kernel: role, profile, tools, running task, budgets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.cli.pipeline_demo import handoff_for
from charter.kernel.envelope import Envelope
from charter.runtime import Runtime
from charter.testing.clock import FakeClock
from charter.workflows.service import WorkflowRuns
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Pipe:
    rt: Runtime
    runs: WorkflowRuns
    run_id: str
    clock: FakeClock

    async def handoff(self, task_id: str, inputs: list[str], **budget: Any) -> None:
        run = await self.runs.run(self.run_id)
        h = handoff_for(run, task_id, inputs)
        h["budget"] = {**h["budget"], **budget}
        await self.runs.record_handoff(self.run_id, task_id, h)

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        call_id: str,
        task_id: str | None = "retrieve",
        profile: str = "retrieval",
        agent: str | None = "retriever",
    ) -> Envelope:
        ctx = await self.rt.resolve_context("app", profile, agent=agent, run_id=self.run_id)
        return await self.rt.kernel.call(
            ctx.context_id, tool, call_id, args, principal=self.rt.principal("app"), task_id=task_id
        )


@pytest.fixture
async def pipe(tmp_path: Path) -> AsyncIterator[Pipe]:
    root = pipeline_project(tmp_path / "rp")
    clock = FakeClock(step=timedelta(milliseconds=1))
    async with pipeline_runtime(root, clock=clock) as rt:
        runs = WorkflowRuns(build=rt.build, store=rt.store, artifacts=rt.artifacts)
        run_id = await runs.create_run("quarterly-report", principal="alice", tenant="acme")
        yield Pipe(rt=rt, runs=runs, run_id=run_id, clock=clock)


def reason(env: Envelope) -> str | None:
    return (env.error or {}).get("reason")


FETCH = {"name": "sales"}


async def test_a_task_that_is_not_running_refuses_calls(pipe: Pipe) -> None:
    env = await pipe.call("data.fetch", FETCH, call_id="c1")
    assert (env.status.value, reason(env)) == ("denied", "TASK_NOT_RUNNING")
    await pipe.handoff("retrieve", [])
    env = await pipe.call("data.fetch", FETCH, call_id="c2")
    assert reason(env) == "TASK_NOT_RUNNING"  # a handoff alone does not start it
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    env = await pipe.call("data.fetch", FETCH, call_id="c3")
    assert env.status.value == "succeeded"
    await pipe.runs.complete_task(pipe.run_id, "retrieve")
    env = await pipe.call("data.fetch", FETCH, call_id="c4")
    assert reason(env) == "TASK_NOT_RUNNING"


async def test_unknown_task_and_ad_hoc_calls(pipe: Pipe) -> None:
    env = await pipe.call("data.fetch", FETCH, call_id="c1", task_id="nope")
    assert reason(env) == "TASK_NOT_FOUND"
    # an ad-hoc run has no tasks at all
    ctx = await pipe.rt.resolve_context("app", "retrieval", agent="retriever")
    env = await pipe.rt.kernel.call(
        ctx.context_id,
        "data.fetch",
        "c2",
        FETCH,
        principal=pipe.rt.principal("app"),
        task_id="retrieve",
    )
    assert reason(env) == "TASK_NOT_FOUND"
    # without a task id, an ad-hoc call keeps working
    env = await pipe.rt.kernel.call(
        ctx.context_id, "data.fetch", "c3", FETCH, principal=pipe.rt.principal("app")
    )
    assert env.status.value == "succeeded"


async def test_role_profile_and_tool_allowlist(pipe: Pipe) -> None:
    await pipe.handoff("retrieve", [])
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    # another role's agent (its own profile offers only its own tool)
    env = await pipe.call("data.fetch", FETCH, call_id="c1", agent=None)
    assert reason(env) == "TASK_ROLE_MISMATCH"
    # the right agent, but a context of another profile: the tool is not even offered
    env = await pipe.call(
        "stats.summarise",
        {"dataset": "artifact-000000000000"},
        call_id="c2",
        profile="analysis",
        agent="retriever",
    )
    assert reason(env) in ("AGENT_SCOPE", "TOOL_NOT_DISCLOSED")
    # a tool the task does not allow, from a context that offers it
    env = await pipe.call(
        "stats.summarise",
        {"dataset": "artifact-000000000000"},
        call_id="c3",
        profile="analysis",
        agent="analyst",
    )
    assert reason(env) == "TASK_ROLE_MISMATCH"


async def test_profile_and_tool_checks_are_specific() -> None:
    from charter.kernel.contexts import OfferedTool, ResolvedContext
    from charter.kernel.task_auth import check_task_call
    from charter.ledger.views import RunRow, TaskRow
    from charter.project.catalog import TaskContract

    contract = TaskContract.from_dict(
        {
            "id": "t",
            "role": "r",
            "profile": "p",
            "required_tools": ["a.tool"],
            "depends_on": [],
            "input_artifacts": [],
            "output_artifacts": ["x"],
            "acceptance_criteria": ["ok"],
        }
    )

    def ctx(profile: str, agent: str | None) -> ResolvedContext:
        return ResolvedContext(
            context_id="ctx-1",
            run_id="run-1",
            build_digest="d",
            principal="p",
            tenant="t",
            kind="application",
            profile=profile,
            agent=agent,
            objective=None,
            tools=(
                OfferedTool(id="a.tool", name="a.tool", version="1", digest="d", effect="read"),
            ),
            schema_digest="s",
            token_estimate=0,
            token_budget=1,
            attachments=(),
            unresolved=(),
            created_at="2025-01-01T00:00:00.000000Z",
            expires_at="2025-01-01T01:00:00.000000Z",
        )

    from datetime import UTC, datetime

    run = RunRow.from_row({"run_id": "run-1", "status": "running"})
    handoff = {"attempt": 1, "seq": 5, "budget": {"max_tool_calls": 2, "timeout_seconds": 60}}
    task_row = {
        "run_id": "run-1",
        "task_id": "t",
        "status": "running",
        "attempts": 1,
        "handoffs": [handoff],
        "updated_at": "2025-01-01T00:00:00.000000Z",
    }
    task = TaskRow.from_row(task_row)
    now = datetime(2025, 1, 1, 0, 0, 30, tzinfo=UTC)

    def decide(**kw: Any) -> str | None:
        args: dict[str, Any] = {
            "run": run,
            "task": task,
            "contract": contract,
            "context": ctx("p", "r"),
            "tool_id": "a.tool",
            "agents": frozenset({"r"}),
            "calls_in_attempt": 0,
            "now": now,
        }
        args.update(kw)
        d = check_task_call(**args)
        return None if d is None else d.reason

    assert decide() is None
    assert decide(context=ctx("other", "r")) == "TASK_PROFILE_MISMATCH"
    assert decide(context=ctx("p", "x")) == "TASK_ROLE_MISMATCH"
    assert decide(context=ctx("p", None), agents=frozenset()) is None  # role is no agent
    assert decide(tool_id="b.tool") == "TASK_TOOL_NOT_ALLOWED"
    assert decide(run=RunRow.from_row({"run_id": "run-1", "status": "paused"})) == "RUN_NOT_RUNNING"
    assert decide(calls_in_attempt=2) == "TASK_CALL_BUDGET_EXHAUSTED"
    assert decide(now=datetime(2025, 1, 1, 0, 1, 1, tzinfo=UTC)) == "TASK_TIMEOUT"
    assert decide(task=TaskRow.from_row({**task_row, "handoffs": []})) == "HANDOFF_MISSING"
    assert decide(contract=None) == "TASK_NOT_FOUND"


async def test_max_tool_calls_counts_the_attempt(pipe: Pipe) -> None:
    await pipe.handoff("retrieve", [], max_tool_calls=1)
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    ctx = await pipe.rt.resolve_context("app", "retrieval", agent="retriever", run_id=pipe.run_id)
    app = pipe.rt.principal("app")

    async def call(call_id: str) -> Envelope:
        return await pipe.rt.kernel.call(
            ctx.context_id, "data.fetch", call_id, FETCH, principal=app, task_id="retrieve"
        )

    assert (await call("c1")).status.value == "succeeded"
    again = await call("c1")  # the recorded receipt: it does not count twice
    assert (again.status.value, again.metrics.cached) == ("succeeded", True)
    env = await call("c2")
    assert (env.status.value, reason(env)) == ("denied", "TASK_CALL_BUDGET_EXHAUSTED")
    # a retry is a new attempt with a fresh handoff and a fresh budget
    await pipe.runs.fail_task(pipe.run_id, "retrieve", "try again")
    await pipe.handoff("retrieve", [], max_tool_calls=1)
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    env = await pipe.call("data.fetch", FETCH, call_id="c3")
    assert reason(env) != "TASK_CALL_BUDGET_EXHAUSTED"


async def test_timeout_seconds_is_measured_from_the_task_start(pipe: Pipe) -> None:
    await pipe.handoff("retrieve", [], timeout_seconds=60)
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    pipe.clock.now += timedelta(seconds=61)
    env = await pipe.call("data.fetch", FETCH, call_id="c1")
    assert (env.status.value, reason(env)) == ("denied", "TASK_TIMEOUT")


async def test_a_running_task_takes_no_new_handoff(pipe: Pipe) -> None:
    from charter.errors import InvalidInput

    await pipe.handoff("retrieve", [])
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    with pytest.raises(InvalidInput) as err:
        await pipe.handoff("retrieve", [], max_tool_calls=100)
    assert err.value.reason == "TASK_RUNNING"


async def test_a_call_into_a_catalog_run_must_name_its_task(pipe: Pipe) -> None:
    await pipe.handoff("retrieve", [])
    await pipe.runs.start_task(pipe.run_id, "retrieve")
    # even the right agent in the right profile, with the task running: no task, no call
    env = await pipe.call("data.fetch", FETCH, call_id="c1", task_id=None)
    assert (env.status.value, reason(env)) == ("denied", "TASK_REQUIRED")
    assert env.tool == "data.fetch"  # the tool was offered: the refusal names it
    assert await pipe.rt.artifact_rows(pipe.run_id) == []
    env = await pipe.call("data.fetch", FETCH, call_id="c2")
    assert env.status.value == "succeeded"
