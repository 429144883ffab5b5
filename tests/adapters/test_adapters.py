"""The framework adapters against the real libraries: every invocation is a governed call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents.tool_context import ToolContext
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from charter.adapters import governed_tools, langchain, openai_agents, pydantic_ai
from charter.runtime import Runtime, open_runtime
from tests.mcp._project import count, make_project

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    make_project(tmp_path)
    async with open_runtime(tmp_path) as rt:
        yield rt


async def test_only_the_offered_tools_with_their_exact_schemas(runtime: Runtime) -> None:
    viewer = await runtime.resolve_context("viewer", "main")
    assert [t.name for t in langchain.tools(runtime, viewer, "viewer")] == ["svc_echo"]
    app = await runtime.resolve_context("app", "main")
    governed = {t.name: t for t in governed_tools(runtime, app, "app")}
    assert set(governed) == {"svc_echo", "svc_store", "svc_audit"}
    contract = runtime.build.tools["svc.echo"].contract
    assert governed["svc_echo"].parameters == contract.args_schema
    (agents_echo,) = [t for t in openai_agents.tools(runtime, app, "app") if t.name == "svc_echo"]
    assert agents_echo.params_json_schema == contract.args_schema


async def test_langchain_calls_are_governed(runtime: Runtime, tmp_path: Path) -> None:
    ctx = await runtime.resolve_context("app", "main")
    tools = {t.name: t for t in langchain.tools(runtime, ctx, "app")}
    answer = json.loads(await tools["svc_echo"].ainvoke({"text": "hi"}))
    assert answer["status"] == "succeeded"
    assert answer["data"]["echo"] == "hi"
    assert count(tmp_path, "echo") == 1
    # the kernel validates: too long for the contract, never dispatched
    refused = json.loads(await tools["svc_echo"].ainvoke({"text": "x" * 500}))
    assert refused["status"] == "rejected"
    assert count(tmp_path, "echo") == 1


async def test_an_approval_then_the_keyed_retry_runs_once(runtime: Runtime, tmp_path: Path) -> None:
    ctx = await runtime.resolve_context("app", "main")
    store = {t.name: t for t in langchain.tools(runtime, ctx, "app")}["svc_store"]
    pending = json.loads(await store.ainvoke({"text": "note"}))
    assert pending["status"] == "pending_approval"
    assert "idempotency_key" in pending["approval"]["retry"]
    assert count(tmp_path, "store") == 0
    call_id = pending["approval"]["retry"].split("idempotency_key=")[1].strip("'")
    await runtime.kernel.decide(
        pending["approval"]["id"], approve=True, principal=runtime.principal("alice"), reason="ok"
    )
    for _ in range(2):  # the identical retry, twice: dispatched once
        done = json.loads(await store.ainvoke({"text": "note", "idempotency_key": call_id}))
        assert done["status"] == "succeeded"
    assert count(tmp_path, "store") == 1


async def test_openai_agents_tool_call_id_is_the_call_id(runtime: Runtime, tmp_path: Path) -> None:
    ctx = await runtime.resolve_context("app", "main")
    (echo,) = [t for t in openai_agents.tools(runtime, ctx, "app") if t.name == "svc_echo"]
    args = json.dumps({"text": "agents"})
    outputs = []
    for _ in range(2):  # the SDK retrying one tool call: one dispatch
        tool_ctx: ToolContext[Any] = ToolContext(
            context=None, tool_name="svc_echo", tool_call_id="tc-1", tool_arguments=args
        )
        outputs.append(json.loads(await echo.on_invoke_tool(tool_ctx, args)))
    assert [o["status"] for o in outputs] == ["succeeded", "succeeded"]
    assert outputs[0]["data"] == outputs[1]["data"]
    assert count(tmp_path, "echo") == 1
    for n, bad in enumerate(('{"text": ', '["not", "an object"]')):  # intake refuses them
        tool_ctx = ToolContext(
            context=None, tool_name="svc_echo", tool_call_id=f"tc-bad-{n}", tool_arguments=bad
        )
        refused = json.loads(await echo.on_invoke_tool(tool_ctx, bad))
        assert refused["status"] == "rejected", refused
        assert refused["error"]["code"] == "invalid_input", refused
    assert count(tmp_path, "echo") == 1


async def test_pydantic_ai_agent_run_goes_through_the_kernel(
    runtime: Runtime, tmp_path: Path
) -> None:
    ctx = await runtime.resolve_context("viewer", "main")
    agent: Agent[None, str] = Agent(
        TestModel(call_tools=["svc_echo"]), tools=pydantic_ai.tools(runtime, ctx, "viewer")
    )
    result = await agent.run("echo something")
    assert count(tmp_path, "echo") == 1
    assert "succeeded" in result.output
    calls = await runtime.store.query_rows("calls", {"tenant": "acme"}, limit=10)
    assert [c["tool_id"] for c in calls] == ["svc.echo"]
    assert calls[0]["state"] == "succeeded"
