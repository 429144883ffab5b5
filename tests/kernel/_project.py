"""The key-value test project plus slow, dying and secret-handling tools, and a deployment.

Used by the concurrency, crash and canary tests, which open the runtime the way a user does
(``open_runtime`` on a project directory, a store URL and a deployment file), often from
separate processes (:mod:`tests.kernel._driver`). Every tool that can have an effect appends
to ``journal.txt`` in the project directory when it runs, so executions are counted inside
the tools, never by the kernel.
"""

from __future__ import annotations

import json
import secrets
import textwrap
from pathlib import Path
from typing import Any

from charter.kernel.envelope import CallStatus
from charter.runtime import Runtime
from tests.kernel.conftest import TOOLS, write_project

EXTRA_TOOLS = '''

import signal


@charter.tool("kv.slow_put", effect="write", permissions=["kv:write"], timeout_s=30)
def slow_put(key: str, value: str, seconds: float, ctx: charter.Context) -> dict[str, Any]:
    """Write a key slowly. With KV_DIE_IN_TOOL=1 the process SIGKILLs itself mid-call."""
    _journal("kv.slow_put", ctx, key=key)
    if os.environ.get("KV_DIE_IN_TOOL") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(seconds)
    data = _load()
    data[key] = value
    _save(data)
    return {"key": key, "written": True}


@charter.tool("svc.connect", permissions=["kv:read"], idempotent=False)
def connect(config: dict[str, Any], ctx: charter.Context) -> dict[str, Any]:
    """Connect with the configured key; always fails, naming the key in its message."""
    _journal("svc.connect", ctx)
    api_key = config["api_key"]
    raise RuntimeError(f"could not connect with {api_key}")


@charter.tool("svc.issue", permissions=["kv:read"])
def issue(config: dict[str, Any], ctx: charter.Context) -> dict[str, Any]:
    """Return the key as a token, and mention it in an innocently named field."""
    _journal("svc.issue", ctx)
    api_key = config["api_key"]
    return {"token": api_key, "note": f"issued for {api_key}", "nested": [{"token": api_key}]}


@charter.tool("svc.configure", effect="write", permissions=["kv:write"])
def configure(config: dict[str, Any], ctx: charter.Context) -> dict[str, Any]:
    """A write that needs approval and takes a secret in a nested argument."""
    _journal("svc.configure", ctx)
    return {"configured": sorted(config)}
'''

CHARTER_YAML = """
name: kvcrash
tools: {python: [tools.py]}
profiles:
  all:
    include: [kv.get, kv.put, kv.slow, kv.slow_put, svc.connect, svc.issue, svc.configure]
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
enable: [kv.put, kv.slow_put, svc.configure]
"""

WRITE_TOOLS = frozenset({"kv.put", "kv.slow_put", "svc.configure"})


def write_runtime_project(root: Path) -> Path:
    """The project, its deployment file and random secrets under ``.charter/secrets``."""
    write_project(root)
    (root / "tools.py").write_text(textwrap.dedent(TOOLS) + EXTRA_TOOLS)
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    (root / "charter.deploy.yaml").write_text(textwrap.dedent(DEPLOY_YAML))
    secrets_dir = root / ".charter" / "secrets"
    secrets_dir.mkdir(parents=True, exist_ok=True)
    for name in ("fingerprint.key", "ledger.key"):
        path = secrets_dir / name
        path.write_text(secrets.token_hex(32) + "\n")
        path.chmod(0o600)
    return root


def journal(project: Path) -> list[dict[str, Any]]:
    path = project / "journal.txt"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def runs_of(project: Path, tool: str) -> int:
    return sum(1 for line in journal(project) if line["tool"] == tool)


async def two_runs(rt: Runtime) -> dict[str, str]:
    """Two runs, ``damaged`` and ``intact``, each with a context (``<name>_ctx``) and one
    finished call ``c1``: the run ids and context ids by name."""
    out: dict[str, str] = {}
    for name in ("damaged", "intact"):
        ctx = await rt.resolve_context("app", "all")
        env = await rt.call(ctx.context_id, "kv.get", "c1", {"key": "k"}, as_="app")
        assert env.status is CallStatus.SUCCEEDED, env
        out[name], out[f"{name}_ctx"] = ctx.run_id, ctx.context_id
    return out
