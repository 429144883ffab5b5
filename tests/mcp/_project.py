"""A small project for the MCP tests: three tools that count their own runs in files."""

from __future__ import annotations

import secrets
import textwrap
from pathlib import Path

TOOLS = '''
"""Tools that count every run in data/<name>.count (so a test can see dispatches)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

import charter

DATA = Path(__file__).resolve().parent.parent / "data"


def _count(name: str) -> int:
    DATA.mkdir(exist_ok=True)
    path = DATA / f"{name}.count"
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


ECHO_RESULT = {
    "type": "object",
    "properties": {"echo": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["echo", "n"],
}


@charter.tool("svc.echo", permissions=["svc:read"], title="Echo", result_schema=ECHO_RESULT)
def echo(text: Annotated[str, Field(max_length=200)]) -> dict[str, Any]:
    """Echo a text back, counting the calls."""
    return {"echo": text, "n": _count("echo")}


@charter.tool("svc.store", effect="write", permissions=["svc:write"])
def store(text: Annotated[str, Field(min_length=1, max_length=200)]) -> dict[str, Any]:
    """Store a text (needs a human approval)."""
    return {"stored": text, "n": _count("store")}


@charter.tool("svc.audit", permissions=["svc:admin"])
def audit() -> dict[str, Any]:
    """Read the audit summary (admins only)."""
    return {"ok": True, "n": _count("audit")}
'''

CHARTER_YAML = """
name: mcp-test
version: 0.1.0
description: MCP test project.
tools:
  python:
    - tools/svc.py
  files:
    - tools/*.yaml
profiles:
  main:
    description: Everything.
    include: [svc.echo, svc.store, svc.audit]
  reader:
    description: Read only.
    include: [svc.echo]
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
    permissions: ["svc:*", "approvals:approve"]
    api_key: {file: .charter/secrets/alice.key}
  app:
    kind: application
    tenant: acme
    permissions: ["svc:read", "svc:write", "svc:admin"]
    api_key: {file: .charter/secrets/app.key}
  viewer:
    kind: application
    tenant: acme
    permissions: ["svc:read"]
    api_key: {file: .charter/secrets/viewer.key}
enable: [svc.store]
default_executor: python
"""

KEYS = ("fingerprint", "ledger", "alice", "app", "viewer")


def make_project(
    root: Path, *, extra_deploy: str = "", extra_profiles: str = "", with_yaml_glob: bool = False
) -> dict[str, str]:
    """Write the project under ``root``; return the principals' API keys by name."""
    (root / "tools").mkdir(parents=True, exist_ok=True)
    (root / "tools" / "svc.py").write_text(textwrap.dedent(TOOLS))
    charter_yaml = CHARTER_YAML
    if not with_yaml_glob:
        charter_yaml = charter_yaml.replace("  files:\n    - tools/*.yaml\n", "")
    (root / "charter.yaml").write_text(charter_yaml + extra_profiles)
    (root / "charter.deploy.yaml").write_text(DEPLOY_YAML + extra_deploy)
    secrets_dir = root / ".charter" / "secrets"
    secrets_dir.mkdir(parents=True, mode=0o700)
    keys = {}
    for name in KEYS:
        value = secrets.token_urlsafe(24)
        path = secrets_dir / f"{name}.key"
        path.write_text(value + "\n")
        path.chmod(0o600)
        keys[name] = value
    return keys


def count(root: Path, name: str) -> int:
    path = root / "data" / f"{name}.count"
    return int(path.read_text()) if path.exists() else 0
