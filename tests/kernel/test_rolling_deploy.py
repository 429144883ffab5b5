"""A rolling deploy: runtimes of two Builds share one store (a SQLite file, PostgreSQL).

Before: a call in a context of the new Build (B2) that reached a runtime still on the old
Build (B1) was refused and its live approval retired (``APPROVAL_STALE``) by that old
runtime — a replica about to be replaced destroyed the newer Build's pending human decision.
Now only a runtime of the store's current Build (the one a runtime opened with last)
retires; any other one refuses retryably and changes nothing. A rollback (a runtime opening
on B1 again) makes B1 current again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

import charter
from charter.kernel.builds import current_build
from charter.kernel.envelope import CallStatus, Envelope
from charter.runtime import Runtime
from tests.kernel._project import runs_of, write_runtime_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio
ARGS = {"key": "k", "value": "v"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def two_builds(tmp: Path) -> tuple[Path, Path]:
    """The project (B1) and a copy whose write tool's contract changed (B2), same secrets."""
    old = write_runtime_project(tmp / "old")
    new = tmp / "new"
    shutil.copytree(old, new)
    tools = (new / "tools.py").read_text()
    assert tools.count('"""Write a key."""') == 1
    (new / "tools.py").write_text(tools.replace('"""Write a key."""', '"""Write one key."""'))
    return old, new


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


async def approval_of(rt: Runtime, approval_id: str) -> dict[str, Any]:
    return dict(await rt.get_approval(approval_id, as_="alice"))


def refused_elsewhere(env: Envelope, *, needs: str, ours: str) -> None:
    assert env.status is CallStatus.DENIED, env
    assert env.error is not None
    assert env.error["reason"] == "CONTEXT_BUILD_CHANGED", env.error
    assert env.error["code"] == "transient_external", env.error
    assert env.error["retryable"] is True
    assert env.error["details"] == {"context_build": needs, "build": ours, "current_build": needs}
    # it says what holds: the ledger does record the refusal (an audit record)
    assert "nothing was recorded" not in env.error["message"]
    assert "no call was reserved or run" in env.error["message"]


async def test_an_old_runtime_leaves_a_new_builds_approval_alone(
    tmp_path: Path, store_url: str
) -> None:
    old_dir, new_dir = two_builds(tmp_path)
    async with AsyncExitStack() as stack:
        old = await stack.enter_async_context(charter.open(old_dir, store=store_url))
        own = await old.resolve_context("app", "all")  # the old replica served before
        new = await stack.enter_async_context(charter.open(new_dir, store=store_url))
        b1, b2 = old.build.digest, new.build.digest
        assert b1 != b2
        ctx = await new.resolve_context("app", "all")
        pending = await new.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app")
        assert pending.status is CallStatus.PENDING_APPROVAL
        assert pending.approval is not None
        approval_id = pending.approval["id"]
        # the retry lands on the old runtime: refused retryably, and nothing changes
        before = len(await new.events(ctx.run_id))
        for _ in range(2):
            again = await old.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app")
            refused_elsewhere(again, needs=b2, ours=b1)
        # the ledger gained the two refusals' audit records, and nothing else
        added = (await new.events(ctx.run_id))[before:]
        assert [(e.type, e.payload["outcome"], e.payload["reason"]) for e in added] == [
            ("tool_call_recorded", "denied", "CONTEXT_BUILD_CHANGED")
        ] * 2
        assert (await approval_of(old, approval_id))["status"] == "pending"
        assert (await new.get_call(ctx.context_id, "w1", as_="app")).state == "pending_approval"
        # a person approves (through either runtime); the old one still runs nothing
        await old.approve(approval_id, as_="alice")
        refused_elsewhere(
            await old.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app"), needs=b2, ours=b1
        )
        assert (await approval_of(new, approval_id))["status"] == "approved"
        done = await new.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app")
        assert done.status is CallStatus.SUCCEEDED, done.error
        assert runs_of(new_dir, "kv.put") == 1
        assert runs_of(old_dir, "kv.put") == 0
        # its receipt is readable through the old runtime too
        receipt = await old.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app")
        assert (receipt.status, receipt.metrics.cached) == (CallStatus.SUCCEEDED, True)
        # the old runtime goes on serving contexts of its own Build
        read = await old.call(own.context_id, "kv.get", "r1", {"key": "k"}, as_="app")
        assert read.status is CallStatus.SUCCEEDED, read.error


async def test_the_current_runtime_retires_an_old_builds_approval(
    tmp_path: Path, store_url: str
) -> None:
    old_dir, new_dir = two_builds(tmp_path)
    async with AsyncExitStack() as stack:
        old = await stack.enter_async_context(charter.open(old_dir, store=store_url))
        ctx = await old.resolve_context("app", "all")
        new = await stack.enter_async_context(charter.open(new_dir, store=store_url))
        pending = await old.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app")
        assert pending.approval is not None
        stale = await new.call(ctx.context_id, "kv.put", "w1", ARGS, as_="app")
        assert stale.status is CallStatus.DENIED
        assert stale.error is not None
        assert (stale.error["code"], stale.error["reason"]) == (
            "permission_denied",
            "CONTEXT_BUILD_CHANGED",
        )
        assert stale.error["retryable"] is False
        assert stale.error["details"] == {
            "context_build": old.build.digest,
            "build": new.build.digest,
        }
        retired = await approval_of(old, pending.approval["id"])
        assert (retired["status"], retired["reason"]) == ("expired", "APPROVAL_STALE")


async def test_a_rollback_makes_the_old_build_current_again(tmp_path: Path, store_url: str) -> None:
    old_dir, new_dir = two_builds(tmp_path)
    async with AsyncExitStack() as stack:
        old = await stack.enter_async_context(charter.open(old_dir, store=store_url))
        ctx_old = await old.resolve_context("app", "all")
        new = await stack.enter_async_context(charter.open(new_dir, store=store_url))
        b1, b2 = old.build.digest, new.build.digest
        ctx_new = await new.resolve_context("app", "all")
        pending_new = await new.call(ctx_new.context_id, "kv.put", "n1", ARGS, as_="app")
        assert pending_new.approval is not None
        pending_old = await old.call(ctx_old.context_id, "kv.put", "o1", ARGS, as_="app")
        assert pending_old.approval is not None
        # roll back: a runtime opens on B1 again, which makes B1 the current Build
        back = await stack.enter_async_context(charter.open(old_dir, store=store_url))
        assert back.build.digest == b1
        # B2 is now the Build being replaced: its runtime retires nothing of B1's contexts
        refused_elsewhere(
            await new.call(ctx_old.context_id, "kv.put", "o1", ARGS, as_="app"),
            needs=b1,
            ours=b2,
        )
        assert (await approval_of(new, pending_old.approval["id"]))["status"] == "pending"
        # and B1's runtimes retire what B2's contexts hold: B2 was rolled back
        stale = await back.call(ctx_new.context_id, "kv.put", "n1", ARGS, as_="app")
        assert stale.error is not None
        assert (stale.error["reason"], stale.error["retryable"]) == ("CONTEXT_BUILD_CHANGED", False)
        retired = await approval_of(back, pending_new.approval["id"])
        assert (retired["status"], retired["reason"]) == ("expired", "APPROVAL_STALE")
        # the rolled-back-to Build's own pending call goes on as ever
        await back.approve(pending_old.approval["id"], as_="alice")
        done = await old.call(ctx_old.context_id, "kv.put", "o1", ARGS, as_="app")
        assert done.status is CallStatus.SUCCEEDED, done.error


async def test_one_shot_commands_leave_the_current_build_alone(
    tmp_path: Path, store_url: str
) -> None:
    """An operator's ``charter approvals ls`` or ``charter call`` from a checkout of the old
    Build, or an ``open_runtime(..., serving=False)``, does not make that Build current (a
    serving runtime's opening does): the new Build's runtimes keep acting as current."""
    old_dir, new_dir = two_builds(tmp_path)
    async with AsyncExitStack() as stack:
        new = await stack.enter_async_context(charter.open(new_dir, store=store_url))
        b2 = new.build.digest
        assert await current_build(new.kernel.state) == b2
        env = {**os.environ, "PYTHONPATH": str(Path(charter.__file__).parents[1])}
        for args in (
            ["approvals", "ls", "--as", "alice"],
            [
                "call",
                "kv.get",
                "--args",
                '{"key": "k"}',
                "--call-id",
                "o1",
                *("--profile", "all"),
                "--as",
                "app",
            ],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "charter", *args, "-p", str(old_dir), "--store", store_url],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            assert await current_build(new.kernel.state) == b2, args
        async with charter.open(old_dir, store=store_url, serving=False) as one_shot:
            assert one_shot.build.digest != b2
        assert await current_build(new.kernel.state) == b2
        async with charter.open(old_dir, store=store_url) as serving:  # a serving one does
            assert await current_build(new.kernel.state) == serving.build.digest != b2
