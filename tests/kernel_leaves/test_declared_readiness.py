"""Local tools report the contract their code declares: a version bump in the decorator makes
the binding not ready (and refuses its calls) until the project is rebuilt."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

import charter
from charter.project.build import build_project, save_build
from charter.runtime import check_readiness

pytestmark = pytest.mark.anyio

TOOLS = '''
import charter


@charter.tool("notes.count", version="1.0.0", permissions=["notes:read"])
def count() -> int:
    """Count the notes."""
    return 3


@charter.tool("notes.size", version="1.0.0", permissions=["notes:read"])
def size() -> int:
    """The notes' size in bytes."""
    return 42
'''
CONFIG = """
name: notes
version: 1.0.0
tools: {python: [tools.py]}
profiles:
  default: {include: [notes.count, notes.size]}
"""
DEPLOY = """
environment: test
readiness: {ttl_s: 0}
secrets:
  fingerprint_key: {file: fp.key}
  ledger_key: {file: ledger.key}
principals:
  app: {kind: application, tenant: acme, permissions: ["notes:*"]}
bindings:
  notes.count: {executor: python}
  notes.size: {executor: subprocess}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write(root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(TOOLS)
    (root / "charter.yaml").write_text(textwrap.dedent(CONFIG))
    (root / "charter.deploy.yaml").write_text(textwrap.dedent(DEPLOY))
    (root / "fp.key").write_text("f" * 40 + "\n")
    (root / "ledger.key").write_text("l" * 40 + "\n")
    build = build_project(root)
    save_build(build, root)
    return build.digest


def bump(root: Path, tool: str) -> None:
    text = (root / "tools.py").read_text()
    marker = f'@charter.tool("{tool}", version="1.0.0"'
    assert marker in text
    (root / "tools.py").write_text(text.replace(marker, marker.replace("1.0.0", "2.0.0")))
    shutil.rmtree(root / "__pycache__", ignore_errors=True)  # same size, same second


async def test_a_version_bump_in_code_is_not_ready_until_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    digest = write(root)
    report = await check_readiness(root, build=digest)
    states = {t.tool_id: t for t in report.tools}
    assert {t: (s.ready, s.reported_version) for t, s in states.items()} == {
        "notes.count": (True, "1.0.0"),
        "notes.size": (True, "1.0.0"),
    }
    assert states["notes.size"].reported_digest == states["notes.size"].expected_digest
    bump(root, "notes.count")
    bump(root, "notes.size")
    report = await check_readiness(root, build=digest)
    for state in report.tools:
        assert (state.ready, state.reason, state.reported_version) == (
            False,
            "VERSION_MISMATCH",
            "2.0.0",
        ), state
        assert "rebuild" in (state.message or "")
        assert state.reported_digest != state.expected_digest
    # Rebuilt: the Build now has 2.0.0, and the code agrees.
    rebuilt = build_project(root)
    save_build(rebuilt, root)
    report = await check_readiness(root, build=rebuilt.digest)
    assert [(s.ready, s.reported_version) for s in report.tools] == [(True, "2.0.0")] * 2


async def test_a_subprocess_tool_whose_code_changed_is_refused_before_dispatch(
    tmp_path: Path,
) -> None:
    root = tmp_path / "notes"
    digest = write(root)
    async with charter.open(root, store="memory:", build=digest) as rt:
        ctx = await rt.resolve_context("app", "default")
        first = await rt.call(ctx.context_id, "notes.size", "c1", {}, as_="app")
        assert first.status == "succeeded"
        bump(root, "notes.size")  # each worker imports the file afresh: the next call would
        refused = await rt.call(ctx.context_id, "notes.size", "c2", {}, as_="app")
        assert refused.status.value == "failed"
        assert refused.error is not None
        assert refused.error["reason"] == "EXECUTOR_CONTRACT_CHANGED"
        assert "VERSION_MISMATCH" in refused.error["message"]


async def test_code_that_no_longer_imports_is_not_ready(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    digest = write(root)
    (root / "tools.py").write_text(TOOLS + "\nraise RuntimeError('half-edited')\n")
    report = await check_readiness(root, build=digest)
    for state in report.tools:
        assert (state.ready, state.reason) == (False, "ENTRYPOINT_INVALID")
        assert "half-edited" in (state.message or "")
