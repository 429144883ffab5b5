"""A context is bound to the Build it was resolved under.

Before: after a restart on a new Build, a call in an old context ran under the new contract,
and a tool removed from the Build made ``Kernel.call`` raise ``KeyError``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus
from charter.kernel.limits import Limiter, LimitSettings, ProcessLimitState
from tests.kernel.conftest import APP, Env, make_kernel

pytestmark = pytest.mark.anyio


def edited_project(env: Env, tmp: Path, *, drop: str | None = None) -> Path:
    """A copy of the test project with a changed description (or a tool dropped)."""
    copy = tmp / "kv-next"
    shutil.copytree(env.project, copy, ignore=shutil.ignore_patterns("journal.txt"))
    yaml = (copy / "charter.yaml").read_text()
    tools = (copy / "tools.py").read_text().replace('"""Read a key."""', '"""Read one key."""')
    if drop is not None:
        yaml = yaml.replace(f"{drop}, ", "")
        tools, found = re.subn(rf'@charter\.tool\("{re.escape(drop)}".*\n', "", tools)
        assert found == 1
    (copy / "charter.yaml").write_text(yaml)
    (copy / "tools.py").write_text(tools)
    return copy


async def test_old_context_after_a_build_change_is_refused(env: Env, tmp_path: Path) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    done = await env.kernel.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert done.status is CallStatus.SUCCEEDED
    # the "restart": a new kernel on the same store, over an edited project
    copy = edited_project(env, tmp_path)
    nxt = make_kernel(copy, env.store, env.clock)
    assert nxt.build.digest != env.kernel.build.digest
    out = await nxt.call(ctx.context_id, "kv.get", "c2", {"key": "a"}, principal=APP)
    assert out.status is CallStatus.DENIED, out
    assert out.error is not None
    assert out.error["code"] == "permission_denied"
    assert out.error["reason"] == "CONTEXT_BUILD_CHANGED"
    assert env.runs_of("kv.get") == 1
    # the receipt of a finished call stays readable, and resubmitting it returns it
    again = await nxt.call(ctx.context_id, "kv.get", "c1", {"key": "a"}, principal=APP)
    assert again.status is CallStatus.SUCCEEDED
    assert again.metrics.cached is True
    assert _attr(await nxt.get_call(ctx.context_id, "c1", "acme"), "state") == "succeeded"
    # a fresh context works under the new Build
    fresh = await nxt.resolve_context(APP, "all")
    ok = await nxt.call(fresh.context_id, "kv.get", "c2", {"key": "a"}, principal=APP)
    assert ok.status is CallStatus.SUCCEEDED
    assert env.runs_of("kv.get") == 1
    assert (copy / "journal.txt").read_text().count('"kv.get"') == 1  # the new Build's tools


@pytest.mark.parametrize("limits", [False, True], ids=["no-limits", "call-limits"])
async def test_tool_removed_from_the_build_is_a_clean_denial(
    env: Env, tmp_path: Path, limits: bool
) -> None:
    """With call limits configured the limiter looked the tool up in the new Build first
    (a ``KeyError`` answered ``internal``); now both paths deny it cleanly."""
    ctx = await env.kernel.resolve_context(APP, "all")
    nxt = make_kernel(edited_project(env, tmp_path, drop="kv.limited"), env.store, env.clock)
    if limits:
        nxt.limiter = Limiter(LimitSettings(), ProcessLimitState())
    assert "kv.limited" not in nxt.build.tools
    out = await nxt.call(ctx.context_id, "kv.limited", "e1", {"n": 1}, principal=APP)
    assert out.status is CallStatus.DENIED, out
    assert out.error is not None
    assert out.error["reason"] == "CONTEXT_BUILD_CHANGED"


async def test_pending_approval_in_an_old_context_is_refused(env: Env, tmp_path: Path) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    args = {"key": "k", "value": "v"}
    pending = await env.kernel.call(ctx.context_id, "kv.put", "w1", args, principal=APP)
    assert pending.status is CallStatus.PENDING_APPROVAL
    nxt = make_kernel(edited_project(env, tmp_path), env.store, env.clock)
    out = await nxt.call(ctx.context_id, "kv.put", "w1", args, principal=APP)
    assert out.status is CallStatus.DENIED
    assert out.error is not None
    assert out.error["reason"] == "CONTEXT_BUILD_CHANGED"
    assert env.runs_of("kv.put") == 0


def _attr(view: Any, name: str) -> Any:
    assert view is not None
    return getattr(view, name)
