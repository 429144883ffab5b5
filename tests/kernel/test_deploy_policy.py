"""The ``policy:`` section of the deployment file, each knob through a real runtime:
``max_danger``, disabled tools, per-agent enablement, ownership hooks by import path (under
the hook deadline, with read-only arguments), scoped modes and observe without approval."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from charter.errors import ConfigError
from charter.kernel.envelope import CallStatus, Envelope
from charter.runtime import Runtime, open_runtime
from tests.kernel._project import runs_of, write_runtime_project
from tests.kernel.conftest import CHARTER_YAML

pytestmark = pytest.mark.anyio

OWNERS = '''
import time

from charter.kernel.authorize import Denial


def owns_key(inp):
    """Only keys that start with the caller's name belong to the caller."""
    key = inp.arguments.get("key", "")
    if not key.startswith(inp.principal.name):
        return Denial(reason="NOT_OWNER", message="this key belongs to someone else")
    return None


def slow(inp):
    time.sleep(2)
    return None
'''


def project_with(tmp_path: Path, policy: str, *, extra: str = "") -> Path:
    root = write_runtime_project(tmp_path / "p")
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    (root / "owners.py").write_text(OWNERS)
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "enable: [kv.put, kv.slow_put, svc.configure]", "enable: [kv.put]"
        )
        + textwrap.dedent(policy)
        + textwrap.dedent(extra)
    )
    return root


async def call(
    rt: Runtime, tool: str, args: dict[str, Any], *, agent: str | None = None, cid: str = "c1"
) -> Envelope:
    ctx = await rt.resolve_context("app", "all", agent=agent)
    return await rt.call(ctx.context_id, tool, cid, args, as_="app")


def reason(env: Envelope) -> str | None:
    return env.error["reason"] if env.error else None


async def test_max_danger_and_disabled_tools(tmp_path: Path) -> None:
    root = project_with(
        tmp_path,
        """
        policy:
          max_danger: low
          disable: [kv.echo]
        """,
    )
    async with open_runtime(root, store="memory:") as rt:
        assert reason(await call(rt, "kv.get", {"key": "a"})) is None
        # kv.put is a write (danger medium by default): above the deployment's max_danger
        assert reason(await call(rt, "kv.put", {"key": "a", "value": "b"})) == "DANGER_POLICY"
        assert reason(await call(rt, "kv.echo", {"payload": {}})) == "TOOL_DISABLED"
    assert runs_of(root, "kv.put") == 0


async def test_per_agent_enablement(tmp_path: Path) -> None:
    root = project_with(
        tmp_path,
        """
        policy:
          agents:
            helper:
              disable: [kv.get]
        """,
    )
    async with open_runtime(root, store="memory:") as rt:
        assert reason(await call(rt, "kv.get", {"key": "a"})) is None
        assert reason(await call(rt, "kv.get", {"key": "a"}, agent="helper")) == "TOOL_DISABLED"
        assert reason(await call(rt, "kv.get", {"key": "a"}, agent="reader_bot")) is None


async def test_per_agent_enable_lets_one_agent_run_a_write(tmp_path: Path) -> None:
    root = write_runtime_project(tmp_path / "p")
    (root / "charter.yaml").write_text(
        textwrap.dedent(CHARTER_YAML).replace("tools: [kv.get]", "tools: [kv.get, kv.propose]")
    )
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text() + "policy:\n  agents:\n    reader_bot:\n      enable: [kv.propose]\n"
    )
    async with open_runtime(root, store="memory:") as rt:
        assert reason(await call(rt, "kv.propose", {"key": "k"})) == "TOOL_NOT_ENABLED"
        assert reason(await call(rt, "kv.propose", {"key": "k"}, agent="reader_bot")) is None


async def test_ownership_hooks_by_import_path(tmp_path: Path) -> None:
    root = project_with(tmp_path, "policy:\n  ownership: ['owners:owns_key']\n")
    async with open_runtime(root, store="memory:") as rt:
        assert reason(await call(rt, "kv.get", {"key": "app-notes"})) is None
        assert reason(await call(rt, "kv.get", {"key": "bobs"}, cid="c2")) == "NOT_OWNER"


async def test_an_ownership_hook_past_its_deadline_denies(tmp_path: Path) -> None:
    root = project_with(
        tmp_path,
        "policy:\n  ownership: ['owners:slow']\n",
        extra="limits:\n  policy_hook_deadline_ms: 50\n",
    )
    async with open_runtime(root, store="memory:") as rt:
        out = await call(rt, "kv.get", {"key": "a"})
    assert reason(out) == "POLICY_ERROR"
    assert "50 ms" in out.error["message"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("policy:\n  ownership: ['owners:nope']\n", "policy.ownership[0]: owners has no function"),
        ("policy:\n  ownership: ['missing_mod:f']\n", "cannot import module 'missing_mod'"),
        ("policy:\n  ownership: ['not a path']\n", "policy.ownership[0]: must be an import path"),
        ("policy:\n  max_danger: extreme\n", "policy.max_danger: must be one of"),
        ("policy:\n  disable: [1]\n", "policy.disable[0]: is not a valid tool id"),
        ("policy:\n  modes: {tools: {kv.get: loud}}\n", "policy.modes.tools.kv.get: must be"),
        ("policy:\n  agents: {helper: {allow: []}}\n", "policy.agents.helper.allow: unknown"),
        ("policy:\n  surprise: 1\n", "policy.surprise: unknown field"),
    ],
)
async def test_bad_policy_entries_are_config_errors(
    tmp_path: Path, policy: str, message: str
) -> None:
    root = project_with(tmp_path, policy)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        async with open_runtime(root, store="memory:"):
            pass


async def test_scoped_observe_keeps_approvals_unless_named(tmp_path: Path) -> None:
    root = project_with(
        tmp_path,
        """
        policy:
          modes:
            tools: {kv.put: observe, kv.delete: observe}
          observe_without_approval: [kv.delete]
        """,
    )
    async with open_runtime(root, store="memory:") as rt:
        put = await call(rt, "kv.put", {"key": "a", "value": "b"})
        assert put.status is CallStatus.PENDING_APPROVAL  # observe: writes still need a human
        # kv.delete is not enabled either; named for observe without approval, it runs
        delete = await call(rt, "kv.delete", {"key": "a", "value": "b"}, cid="d1")
        assert delete.status is CallStatus.SUCCEEDED
        events = await rt.events(delete.run_id or "")
        started = [
            e.payload
            for e in events
            if e.type == "tool_progress" and e.payload.get("call_id") == "d1"
        ]
        assert started[0]["mode"] == "observe"
        reasons = {w["reason"] for w in started[0]["execution_audit"]["would"]}
        assert reasons == {"TOOL_NOT_ENABLED", "APPROVAL_REQUIRED"}
    assert runs_of(root, "kv.delete") == 1
    assert runs_of(root, "kv.put") == 0
