"""A project with a delegating tool (``team.run``) that calls other tools through the
runtime while it runs, as an in-process agent team would."""

from __future__ import annotations

import secrets
import textwrap
from pathlib import Path

TOOLS = '''
"""Delegation test tools."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio

import charter
from tests.delegation import holder

HERE = Path(__file__).resolve().parent


@charter.tool("kv.get", permissions=["kv:read"])
def get(key: str) -> dict[str, Any]:
    """Read a key."""
    return {"key": key, "value": None}


@charter.tool("kv.put", effect="write", permissions=["kv:write"])
def put(key: str, value: str) -> dict[str, Any]:
    """Write a key."""
    return {"key": key, "written": True}


@charter.tool("kv.slow", permissions=["kv:read"], timeout_s=60)
def slow(seconds: float) -> dict[str, Any]:
    """Sleep, then answer (with DIE_IN_SLOW=1: say so, then wait to be killed)."""
    if os.environ.get("DIE_IN_SLOW") == "1":
        (HERE / "slow-started").write_text("1")
        time.sleep(600)
    time.sleep(seconds)
    return {"slept": seconds}


@charter.tool("team.run", delegates_execution=True, permissions=["kv:read"], timeout_s=60)
async def team_run(keys: list[str], ctx: charter.Context) -> dict[str, Any]:
    """Run a small team: read each key, then ask to write one (each call governed)."""
    rt = holder.RUNTIME[0]
    statuses = []
    for i, key in enumerate(keys):
        env = await rt.call(
            ctx.context_id, "kv.get", f"{ctx.call_id}.get{i}", {"key": key}, as_=ctx.principal
        )
        statuses.append(env.status.value)
    env = await rt.call(
        ctx.context_id, "kv.put", f"{ctx.call_id}.put", {"key": "k", "value": "v"},
        as_=ctx.principal,
    )
    statuses.append(env.status.value)
    env = await rt.call(ctx.context_id, "kv.secret", f"{ctx.call_id}.x", {}, as_=ctx.principal)
    statuses.append(env.status.value)
    return {"statuses": statuses, "span": ctx.span_id}


@charter.tool("team.hold", delegates_execution=True, permissions=["kv:read"], timeout_s=60)
async def team_hold(ctx: charter.Context) -> dict[str, Any]:
    """Start a slow child, report, wait for the test's gates, then finish."""
    rt = holder.RUNTIME[0]
    child = asyncio.ensure_future(
        rt.call(ctx.context_id, "kv.slow", f"{ctx.call_id}.slow", {"seconds": 0.2},
                as_=ctx.principal)
    )
    holder.SEEN["span"] = ctx.span_id
    holder.gate("started").set()
    await holder.gate("release").wait()
    env = await child
    return {"child": env.status.value}


@charter.tool("team.write", effect="write", delegates_execution=True, permissions=["kv:write"])
async def team_write(ctx: charter.Context) -> dict[str, Any]:
    """A delegating write: checks that the run's write lock is free while it runs."""
    rt = holder.RUNTIME[0]
    with anyio.fail_after(10):
        async with rt.store.run_lock(ctx.run_id):
            pass
    return {"lock_free": True}


@charter.tool("team.crash", delegates_execution=True, permissions=["kv:read"], timeout_s=600)
async def team_crash(ctx: charter.Context) -> dict[str, Any]:
    """One child succeeds, a second is left in flight, and the process is killed."""
    rt = holder.RUNTIME[0]
    await rt.call(ctx.context_id, "kv.get", f"{ctx.call_id}.get", {"key": "a"}, as_=ctx.principal)
    await rt.call(ctx.context_id, "kv.slow", f"{ctx.call_id}.slow", {"seconds": 1},
                  as_=ctx.principal)
    return {}
'''

CHARTER_YAML = """
name: delegation
tools: {python: [tools.py]}
profiles:
  all:
    include: [kv.get, kv.put, kv.slow, team.run, team.hold, team.write, team.crash]
"""

DEPLOY_YAML = """
environment: test
mode: enforce
secrets:
  fingerprint_key: {file: .charter/secrets/fingerprint.key}
  ledger_key: {file: .charter/secrets/ledger.key}
principals:
  alice:
    kind: operator
    tenant: acme
    permissions: [kv:read, kv:write, approvals:approve]
  app:
    kind: application
    tenant: acme
    permissions: [kv:read, kv:write]
enable: [kv.put, team.write]
"""


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(textwrap.dedent(TOOLS))
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    (root / "charter.deploy.yaml").write_text(textwrap.dedent(DEPLOY_YAML))
    secrets_dir = root / ".charter" / "secrets"
    secrets_dir.mkdir(parents=True, exist_ok=True)
    for name in ("fingerprint.key", "ledger.key"):
        path = secrets_dir / name
        path.write_text(secrets.token_hex(32) + "\n")
        path.chmod(0o600)
    return root
