"""``charter calls show`` prints a delegating call's tree, and a delegated call's parent
(the real executable in a subprocess, over the SQLite file a runtime wrote)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import charter
from charter.runtime import open_runtime
from tests.delegation import holder
from tests.delegation._project import write_project

ROOT = Path(__file__).resolve().parents[2]
STORE = "sqlite:///.charter/charter.db"


def run_charter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "COLUMNS": "120",
        "PYTHONPATH": os.pathsep.join([str(Path(charter.__file__).parents[1]), str(ROOT)]),
    }
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.mark.anyio
async def test_calls_show_prints_the_delegation_tree(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    async with open_runtime(project, store=STORE) as rt:
        holder.RUNTIME[:] = [rt]
        ctx = await rt.resolve_context("app", "all")
        env = await rt.call(ctx.context_id, "team.run", "t1", {"keys": ["a"]}, as_="app")
        assert env.status.value == "succeeded"
        plain = await rt.call(ctx.context_id, "kv.get", "p1", {"key": "a"}, as_="app")
        assert plain.status.value == "succeeded"
    holder.RUNTIME.clear()
    span = env.trace["span_id"]
    where = ["--context", ctx.context_id, "--project", str(project), "--store", STORE]

    shown = run_charter("calls", "show", "t1", *where, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    row = json.loads(shown.stdout)
    tree = row["delegation"]
    assert tree["delegates_execution"] is True
    assert tree["span_id"] == span
    assert tree["parent"] is None
    assert [(c["call_id"], c["state"]) for c in tree["children"]] == [
        ("t1.get0", "succeeded"),
        ("t1.put", "pending_approval"),
    ]
    assert all(c["parent_span_id"] == span for c in tree["children"])

    text = run_charter("calls", "show", "t1", *where, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert f"delegates execution (span {span}): 2 call(s) made inside" in text.stdout
    assert "└─ t1.get0  succeeded  kv.get" in text.stdout
    assert "└─ t1.put  pending_approval  kv.put" in text.stdout

    child = run_charter("calls", "show", "t1.get0", *where, "--json", cwd=tmp_path)
    assert child.returncode == 0, child.stderr
    parent = json.loads(child.stdout)["delegation"]["parent"]
    assert parent["call_id"] == "t1"
    assert parent["span_id"] == span
    child_text = run_charter("calls", "show", "t1.get0", *where, cwd=tmp_path)
    assert f"made inside delegating span {span} call t1 (team.run, succeeded)" in child_text.stdout

    alone = run_charter("calls", "show", "p1", *where, "--json", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    assert "delegation" not in json.loads(alone.stdout)
