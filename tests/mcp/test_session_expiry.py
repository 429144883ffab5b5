"""An MCP session kept open across its context's expiry (15 minutes; the runtime's clock is
injected), driven by the official SDK client connected in-process to Charter's MCP server.

The session renews its context by itself, but a keyed call goes to the context that first
saw its key. A key whose first call reserved nothing (rejected for its arguments) used to be
denied ``CONTEXT_EXPIRED`` — "resolve a new one", which an MCP client cannot do — for good;
now it runs in the current context. A key whose call waits for an approval in the expired
context stays bound to it (nothing ran, nothing may run twice) and the answer says what to do;
so does a keyed retry that reaches a replica running a newer Build (a rolling deploy).
"""

from __future__ import annotations

import shutil
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from charter.errors import PermissionDenied
from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._server import build_server
from charter.runtime import ledger_key_for, open_runtime
from tests.mcp import _flow
from tests.mcp._project import count, make_project

pytestmark = pytest.mark.anyio


def _status(result: Any) -> str:
    return str((result.meta or {}).get("charter/status"))


async def test_a_key_that_reserved_nothing_is_usable_after_the_context_expired(
    tmp_path: Path,
) -> None:
    make_project(tmp_path)
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    async with open_runtime(tmp_path, clock=lambda: now[0]) as rt:
        who, session = rt.principal("app"), McpSession()

        async def identify(_ctx: Any) -> tuple[Any, McpSession]:
            return who, session

        async with Client(build_server(Gateway(rt, "main"), identify), cache=None) as client:
            bad = await client.call_tool("svc_echo", {"text": "x" * 500, "idempotency_key": "e-1"})
            assert _status(bad) == "rejected", _flow.text(bad)
            now[0] += timedelta(minutes=16)  # the session's context has expired
            fixed = await client.call_tool("svc_echo", {"text": "x", "idempotency_key": "e-1"})
            assert _status(fixed) == "succeeded", _flow.text(fixed)
            assert count(tmp_path, "echo") == 1
            again = await client.call_tool("svc_echo", {"text": "x", "idempotency_key": "e-1"})
            assert again.structured_content == fixed.structured_content  # the recorded result
            assert count(tmp_path, "echo") == 1
            run_id = str((fixed.meta or {})["charter/run_id"])
        assert (await rt.verify(run_id, ledger_key_for(tmp_path))).ok


async def test_a_call_approved_after_its_context_expired_says_how_to_go_on(
    tmp_path: Path,
) -> None:
    make_project(tmp_path)
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    async with open_runtime(tmp_path, clock=lambda: now[0]) as rt:
        who, session = rt.principal("app"), McpSession()

        async def identify(_ctx: Any) -> tuple[Any, McpSession]:
            return who, session

        async with Client(build_server(Gateway(rt, "main"), identify), cache=None) as client:
            await client.call_tool("svc_echo", {"text": "start"})  # the context is resolved
            now[0] += timedelta(minutes=14)
            asked = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-1"})
            assert _status(asked) == "pending_approval", _flow.text(asked)
            assert asked.structured_content is not None
            now[0] += timedelta(minutes=2)  # the context expired, and its approval with it
            with pytest.raises(PermissionDenied) as expired:
                await rt.approve(asked.structured_content["approval"]["id"], as_="alice")
            assert expired.value.reason == "APPROVAL_EXPIRED"
            late = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-1"})
            assert late.is_error
            assert late.structured_content is not None
            error = late.structured_content["error"]
            assert error["reason"] == "CONTEXT_EXPIRED"
            assert "resolve a new one" not in error["message"]
            assert "nothing ran" in error["message"]
            assert "new idempotency_key" in error["message"]
            assert count(tmp_path, "store") == 0
            fresh = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-2"})
            assert _status(fresh) == "pending_approval", _flow.text(fresh)
            assert fresh.structured_content is not None
            await rt.approve(fresh.structured_content["approval"]["id"], as_="alice")
            done = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-2"})
            assert _status(done) == "succeeded", _flow.text(done)
            again = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-1"})
            assert _status(again) == "denied"  # still bound to the call that never ran
            assert count(tmp_path, "store") == 1
            run_id = str((done.meta or {})["charter/run_id"])
        assert (await rt.verify(run_id, ledger_key_for(tmp_path))).ok


async def test_a_keyed_retry_reaching_a_redeployed_replica_says_how_to_go_on(
    tmp_path: Path,
) -> None:
    """A rolling deploy: two runtimes on one store, the second built after the write tool's
    description changed. A keyed write asked for approval on the old replica and retried on
    the new one never runs there (its context belongs to the old Build) and the answer says
    to call again with a new key, instead of "resolve a new one"."""
    make_project(tmp_path)
    async with open_runtime(tmp_path) as old:
        who = old.principal("app")

        async def on_old(_ctx: Any) -> tuple[Any, McpSession]:
            return who, McpSession(request_ids_unique=False)

        async with Client(build_server(Gateway(old, "main"), on_old), cache=None) as client:
            asked = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-1"})
            assert _status(asked) == "pending_approval", _flow.text(asked)
        source = tmp_path / "tools" / "svc.py"
        source.write_text(source.read_text().replace("(needs a human approval)", "(approved)"))
        async with open_runtime(tmp_path) as new:
            assert new.build.digest != old.build.digest

            async def on_new(_ctx: Any) -> tuple[Any, McpSession]:
                return new.principal("app"), McpSession(request_ids_unique=False)

            async with Client(build_server(Gateway(new, "main"), on_new), cache=None) as client:
                late = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-1"})
                assert late.structured_content is not None
                error = late.structured_content["error"]
                assert error["reason"] == "CONTEXT_BUILD_CHANGED", error
                assert "resolve a new one" not in error["message"]
                assert "new idempotency_key" in error["message"]
                fresh = await client.call_tool("svc_store", {"text": "t", "idempotency_key": "s-2"})
                assert _status(fresh) == "pending_approval", _flow.text(fresh)
    assert count(tmp_path, "store") == 0


async def test_a_keyed_retry_reaching_an_old_replica_leaves_the_call_to_the_new_one(
    tmp_path: Path,
) -> None:
    """The other direction of a rolling deploy: the keyed write asked for approval on the
    new replica (the store's current Build) and retried on the old one. The old replica
    changes nothing — the key stays bound to its call, the approval stays pending — and
    answers retryably; the approved call then runs on the new replica."""
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    make_project(old_dir)
    shutil.copytree(old_dir, new_dir)  # the same secrets; its own code
    source = new_dir / "tools" / "svc.py"
    source.write_text(source.read_text().replace("(needs a human approval)", "(approved)"))
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    async with AsyncExitStack() as stack:
        old = await stack.enter_async_context(open_runtime(old_dir, store=store))
        await old.resolve_context("app", "main")  # the old replica served before the new one
        new = await stack.enter_async_context(open_runtime(new_dir, store=store))
        assert new.build.digest != old.build.digest

        def session(rt: Any) -> Any:
            async def identify(_ctx: Any) -> tuple[Any, McpSession]:
                return rt.principal("app"), McpSession(request_ids_unique=False)

            return Client(build_server(Gateway(rt, "main"), identify), cache=None)

        async with session(new) as on_new, session(old) as on_old:
            key = {"text": "t", "idempotency_key": "s-1"}
            asked = await on_new.call_tool("svc_store", key)
            assert _status(asked) == "pending_approval", _flow.text(asked)
            assert asked.structured_content is not None
            approval_id = asked.structured_content["approval"]["id"]
            late = await on_old.call_tool("svc_store", key)
            assert late.structured_content is not None
            error = late.structured_content["error"]
            assert (error["reason"], error["retryable"]) == ("CONTEXT_BUILD_CHANGED", True)
            assert "new idempotency_key" not in error["message"]
            approval = await new.get_approval(approval_id, as_="alice")
            assert approval["status"] == "pending"
            await old.approve(approval_id, as_="alice")
            done = await on_new.call_tool("svc_store", key)
            assert _status(done) == "succeeded", _flow.text(done)
    assert (count(new_dir, "store"), count(old_dir, "store")) == (1, 0)
