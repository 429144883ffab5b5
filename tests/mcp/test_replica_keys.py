"""A keyed MCP retry reaches the call it repeats from any session, process or replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.mcp._gateway import Gateway, McpSession
from charter.runtime import open_runtime
from tests.mcp._project import count, make_project


@pytest.mark.anyio
async def test_a_keyed_retry_through_another_replica_does_not_run_again(tmp_path: Path) -> None:
    make_project(tmp_path)
    # Two runtimes on one database: two replicas, each with its own MCP sessions.
    async with open_runtime(tmp_path) as a, open_runtime(tmp_path) as b:
        first = await Gateway(a, "main").call_tool(
            a.principal("app"),
            McpSession(request_ids_unique=False),
            "svc.echo",
            {"text": "hi", "idempotency_key": "key-1"},
            None,
        )
        again = await Gateway(b, "main").call_tool(
            b.principal("app"),
            McpSession(request_ids_unique=False),
            "svc.echo",
            {"text": "hi", "idempotency_key": "key-1"},
            None,
        )
        assert not first.is_error
        assert not again.is_error
        assert again.structured_content == first.structured_content
        assert count(tmp_path, "echo") == 1

        # Another principal's identical key is its own call, and so is another profile's.
        other = await Gateway(b, "main").call_tool(
            b.principal("viewer"),
            McpSession(request_ids_unique=False),
            "svc.echo",
            {"text": "hi", "idempotency_key": "key-1"},
            None,
        )
        assert not other.is_error
        assert count(tmp_path, "echo") == 2
        reader = await Gateway(b, "reader").call_tool(
            b.principal("app"),
            McpSession(request_ids_unique=False),
            "svc.echo",
            {"text": "hi", "idempotency_key": "key-1"},
            None,
        )
        assert not reader.is_error
        assert count(tmp_path, "echo") == 3
