"""A keyed MCP retry reaches the call it repeats from any session, process or replica."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import mcp_types as types
import pytest

from charter.mcp import _gateway
from charter.mcp._gateway import Gateway, McpSession
from charter.runtime import Runtime, open_runtime
from tests.mcp._project import count, make_project


async def keyed_echo(runtime: Runtime, who: str, profile: str = "main") -> types.CallToolResult:
    """``svc.echo`` with the idempotency key ``key-1``, in a new (stateless HTTP) session."""
    result = await Gateway(runtime, profile).call_tool(
        runtime.principal(who),
        McpSession(request_ids_unique=False),
        "svc.echo",
        {"text": "hi", "idempotency_key": "key-1"},
        None,
    )
    assert not result.is_error
    return result


@pytest.mark.anyio
async def test_a_keyed_retry_through_another_replica_does_not_run_again(tmp_path: Path) -> None:
    make_project(tmp_path)
    # Two runtimes on one database: two replicas, each with its own MCP sessions.
    async with open_runtime(tmp_path) as a, open_runtime(tmp_path) as b:
        first = await keyed_echo(a, "app")
        again = await keyed_echo(b, "app")
        assert again.structured_content == first.structured_content
        assert count(tmp_path, "echo") == 1
        # Another principal's identical key is its own call, and so is another profile's.
        await keyed_echo(b, "viewer")
        assert count(tmp_path, "echo") == 2
        await keyed_echo(b, "app", profile="reader")
        assert count(tmp_path, "echo") == 3


@pytest.mark.anyio
async def test_an_http_session_starts_a_new_run_when_its_context_expires(tmp_path: Path) -> None:
    make_project(tmp_path)
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    async with open_runtime(tmp_path, clock=lambda: now[0]) as rt:
        gateway, who = Gateway(rt, "main"), rt.principal("app")
        http, stdio = McpSession(request_ids_unique=False), McpSession()
        for session in (http, stdio):
            await gateway.call_tool(who, session, "svc.echo", {"text": "a"}, 1)
        first_http, first_stdio = http.run_id, stdio.run_id
        await keyed_echo(rt, "app")  # key-1, recorded in another session's run
        now[0] += timedelta(hours=1)  # every context has expired
        for session in (http, stdio):
            await gateway.call_tool(who, session, "svc.echo", {"text": "b"}, 2)
        assert http.run_id is not None
        assert http.run_id != first_http  # a run per context lifetime over stateless HTTP
        assert stdio.run_id == first_stdio  # one run per stdio connection
        before = count(tmp_path, "echo")
        await keyed_echo(rt, "app")  # the keyed retry still finds its call
        assert count(tmp_path, "echo") == before


@pytest.mark.anyio
async def test_a_session_keeps_few_keys_in_memory_and_finds_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_gateway, "_KEYS_KEPT", 2)
    make_project(tmp_path)
    async with open_runtime(tmp_path) as rt:
        gateway, who, session = Gateway(rt, "main"), rt.principal("app"), McpSession()
        for n in range(3):
            args = {"text": "hi", "idempotency_key": f"k-{n}"}
            await gateway.call_tool(who, session, "svc.echo", args, n)
        assert list(session.key_contexts) == ["k-1", "k-2"]  # the oldest key was dropped
        again = {"text": "hi", "idempotency_key": "k-0"}
        assert not (await gateway.call_tool(who, session, "svc.echo", again, 9)).is_error
        assert count(tmp_path, "echo") == 3  # k-0 was found in the store, not run again


@pytest.mark.anyio
async def test_a_keyed_retry_is_found_behind_many_calls_of_others_with_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store lists a tenant's calls with one id by their place in their own runs: other
    principals' calls with the same id early in short runs come before the principal's own
    call late in a long run. The retry still finds it (it read the first 20 and ran again)."""
    make_project(tmp_path)
    async with open_runtime(tmp_path) as rt:
        gateway, app, session = Gateway(rt, "main"), rt.principal("app"), McpSession()
        for n in range(5):  # the keyed call comes late in its run
            await gateway.call_tool(app, session, "svc.echo", {"text": "a"}, n)
        keyed = {"text": "hi", "idempotency_key": "key-1"}
        assert not (await gateway.call_tool(app, session, "svc.echo", keyed, 9)).is_error
        for _ in range(25):  # another principal's calls with the id key-1, each in a fresh run
            ctx = await rt.resolve_context("viewer", "main")
            await rt.call(ctx.context_id, "svc.echo", "key-1", {"text": "v"}, as_="viewer")
        before = count(tmp_path, "echo")
        again = await keyed_echo(rt, "app")  # a new session: found through the store
        assert (again.meta or {}).get("charter/status") == "succeeded"
        assert count(tmp_path, "echo") == before  # not run again
        # More calls with the key than are read, none of them the principal's: refused, not
        # run as a new call (which might be a second run of a retry).
        monkeypatch.setattr(_gateway, "_KEY_SCAN", 3)
        refused = await Gateway(rt, "main").call_tool(
            app, McpSession(request_ids_unique=False), "svc.echo", dict(keyed), None
        )
        assert refused.is_error
        assert "IDEMPOTENCY_KEY_AMBIGUOUS" in str(refused.model_dump())
        assert count(tmp_path, "echo") == before
