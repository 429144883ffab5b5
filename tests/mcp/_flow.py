"""The acceptance flow, shared by the stdio and the streamable-HTTP tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from tests.mcp._project import count

CHARTER = str(Path(sys.executable).with_name("charter"))


async def charter_cli(project: Path, *args: str) -> str:
    done = await anyio.run_process([CHARTER, *args], cwd=project, check=False)
    assert done.returncode == 0, done.stderr.decode() + done.stdout.decode()
    return done.stdout.decode()


async def run_events(project: Path, run_id: str) -> list[dict[str, Any]]:
    out = await charter_cli(project, "runs", "events", run_id, "--json")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def check_listing(main: Client, viewer: Client) -> None:
    listed = {t.name: t for t in (await main.list_tools()).tools}
    assert set(listed) == {"svc_echo", "svc_store", "svc_audit"}
    echo, store = listed["svc_echo"], listed["svc_store"]
    assert echo.title == "Echo"
    assert echo.description == "Echo a text back, counting the calls."
    assert echo.input_schema["required"] == ["text"]
    assert "idempotency_key" not in echo.input_schema["properties"]
    assert echo.annotations is not None
    assert store.annotations is not None
    assert echo.annotations.read_only_hint is True
    assert echo.annotations.idempotent_hint is True
    assert echo.annotations.open_world_hint is False
    assert store.annotations.read_only_hint is False
    assert store.annotations.destructive_hint is True
    assert echo.output_schema is not None
    assert echo.output_schema["type"] == "object"
    # a principal without svc:write and svc:admin sees fewer tools
    assert {t.name for t in (await viewer.list_tools()).tools} == {"svc_echo"}


async def check_read_and_ledger(client: Client, project: Path) -> None:
    result = await client.call_tool("svc_echo", {"text": "hi"})
    assert not result.is_error, text(result)
    assert result.structured_content == {"echo": "hi", "n": 1}
    assert json.loads(text(result)) == {"echo": "hi", "n": 1}
    meta = result.meta or {}
    run_id, call_id = meta["charter/run_id"], meta["charter/call_id"]
    assert run_id.startswith("mcp-session-")
    events = await run_events(project, run_id)
    assert events[0]["type"] == "run_created"
    assert events[0]["payload"]["workflow_slug"] == "mcp-session"
    recorded = [
        e["payload"]
        for e in events
        if e["type"] == "tool_call_recorded" and e["payload"]["call_id"] == call_id
    ]
    assert [p["outcome"] for p in recorded] == ["succeeded"]
    # the same session reuses its run
    again = await client.call_tool("svc_echo", {"text": "again"})
    assert (again.meta or {})["charter/run_id"] == run_id


async def check_invalid(client: Client) -> None:
    result = await client.call_tool("svc_echo", {"text": 42})
    assert result.is_error
    assert text(result).startswith("invalid_input ARGS_")
    error = (result.structured_content or {})["error"]
    assert error["code"] == "invalid_input"
    assert error["reason"].startswith("ARGS_")
    denied = await client.call_tool("svc_nope", {})
    assert denied.is_error
    assert "TOOL_NOT_DISCLOSED" in text(denied)


async def check_approval_and_retry(client: Client, project: Path, key: str) -> None:
    args = {"text": "keep me", "idempotency_key": key}
    pending = await client.call_tool("svc_store", args)
    assert pending.is_error
    message = text(pending)
    approval = (pending.structured_content or {})["approval"]
    assert approval["id"] in message
    assert approval["expires_at"] in message
    assert f"charter approvals approve {approval['id']} --as OPERATOR" in message
    assert key in message
    assert count(project, "store") == 0
    await charter_cli(project, "approvals", "approve", approval["id"], "--as", "alice")
    done = await client.call_tool("svc_store", args)
    assert not done.is_error, text(done)
    assert done.structured_content == {"stored": "keep me", "n": 1}
    # the same key again: the recorded result, nothing dispatched
    again = await client.call_tool("svc_store", args)
    assert not again.is_error
    assert again.structured_content == {"stored": "keep me", "n": 1}
    assert count(project, "store") == 1
    # the same key with other arguments is a conflict
    other = await client.call_tool("svc_store", {**args, "text": "other"})
    assert other.is_error
    assert "IDEMPOTENCY_CONFLICT" in text(other)


async def check_read_key_dedup(client: Client, project: Path, key: str) -> None:
    before = count(project, "echo")
    first = await client.call_tool("svc_echo", {"text": "once", "idempotency_key": key})
    second = await client.call_tool("svc_echo", {"text": "once", "idempotency_key": key})
    assert first.structured_content == second.structured_content
    assert count(project, "echo") == before + 1
