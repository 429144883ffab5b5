"""MCP sessions inside a catalog run, through the official MCP client over stdio: a session
bound to a run and task (``charter mcp --run RUN --task TASK``), or bound to a run with the
task named per call in ``_meta`` — and the same refusals as on every surface."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from charter.runtime import Runtime, open_runtime
from charter.workflows.control import handoff_template
from tests.workflows.pipeline_env import pipeline_project


def pipeline_runtime(root: Path) -> Any:
    """The project's runtime on the wall clock: the MCP subprocess measures task budgets
    against the same time."""
    return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")


pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def server(
    root: Path, run_id: str, *extra: str, profile: str = "retrieval"
) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    args = ["-m", "charter", "mcp", "--profile", profile, "--as", "app"]
    return StdioServerParameters(
        command=sys.executable,
        args=[*args, "--project", str(root), "--run", run_id, *extra],
        cwd=root,
        env=env,
    )


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def reason(result: Any) -> str:
    assert result.is_error, text(result)
    return str((result.structured_content or {})["error"]["reason"])


async def start(rt: Runtime, run_id: str, task_id: str) -> None:
    task = await rt.workflows.task(run_id, task_id, as_="alice")
    inputs = {a.type: a.artifact_id for a in await rt.artifact_rows(run_id) if a.type}
    handoff = handoff_template(task, sender_role="coordinator", inputs=inputs)
    await rt.workflows.record_handoff(run_id, task_id, handoff, as_="alice")
    await rt.workflows.start_task(run_id, task_id, as_="alice")


async def test_sessions_bound_to_a_run_and_a_task(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        run_id = await rt.workflows.create_run("quarterly-report", as_="alice")
        await start(rt, run_id, "retrieve")
    fetch = {"name": "sales"}
    async with (
        Client(server(root, run_id, "--task", "retrieve"), cache=None) as bound,
        Client(server(root, run_id, "--agent", "retriever"), cache=None) as run_only,
    ):
        names = {t.name for t in (await bound.list_tools()).tools}
        assert len(names) == 1
        name = names.pop()
        # a session in the run that names no task is refused, and nothing runs
        assert reason(await run_only.call_tool(name, fetch)) == "TASK_REQUIRED"
        # outside the task's allowlist: not offered in the task's profile
        assert reason(await bound.call_tool("stats_summarise", {"dataset": "x"})) in (
            "TOOL_NOT_DISCLOSED",
            "AGENT_SCOPE",
        )
        done = await bound.call_tool(name, fetch)  # the bound task
        assert not done.is_error, text(done)
        assert (done.meta or {})["charter/run_id"] == run_id
        bad = await run_only.call_tool(name, fetch, meta={"charter/task_id": 7})
        assert reason(bad) == "TASK_ID_INVALID"
        async with pipeline_runtime(root) as rt:
            await rt.workflows.complete_task(run_id, "retrieve", as_="alice")
            await start(rt, run_id, "analyse")
        # the task is over for this session; the analyst's task is not the retriever's
        assert reason(await bound.call_tool(name, fetch)) == "TASK_NOT_RUNNING"
        wrong = await bound.call_tool(name, fetch, meta={"charter/task_id": "analyse"})
        assert reason(wrong) == "TASK_ROLE_MISMATCH"
    # the analyst's session is bound to the run only and names its task per call
    analyst = server(root, run_id, "--agent", "analyst", profile="analysis")
    async with Client(analyst, cache=None) as per_call:
        async with pipeline_runtime(root) as rt:
            dataset = {"dataset": (await rt.artifact_rows(run_id))[0].artifact_id}
        tool = (await per_call.list_tools()).tools[0].name
        assert reason(await per_call.call_tool(tool, dataset)) == "TASK_REQUIRED"
        summed = await per_call.call_tool(tool, dataset, meta={"charter/task_id": "analyse"})
        assert not summed.is_error, text(summed)
    async with pipeline_runtime(root) as rt:
        rows = await rt.artifact_rows(run_id)
        assert [(a.type, a.producer.get("task_id")) for a in rows] == [
            ("dataset", "retrieve"),
            ("summary", "analyse"),
        ]


async def test_a_task_of_another_tenant_fails_before_serving(tmp_path: Path) -> None:
    import anyio

    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        run_id = await rt.workflows.create_run("quarterly-report", as_="alice")
    params = server(root, run_id, "--task", "retrieve")
    argv = [params.command, *params.args]
    argv[argv.index("app")] = "intruder"
    done = await anyio.run_process(argv, cwd=root, env=params.env, check=False)
    assert done.returncode != 0
    assert b"RUN_NOT_FOUND" in done.stderr + done.stdout
