"""A tool that ends its process (``os._exit``), under ``charter serve`` as a subprocess.

In the in-process ``python`` executor nothing can catch ``os._exit``: the server ends with the
tool. What must hold then is recovery: the call was recorded ``dispatching`` before the tool
ran, and the server started again reconciles it to ``unknown`` (its owner is dead), so the
call is reported ``unknown`` — never ``succeeded``, never left ``dispatching``. Under the
``subprocess`` executor only the worker ends: that call is ``unknown`` / ``WORKER_LOST``
naming the exit status, and the same server goes on serving.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest

from tests.server._harness import Project, spawn_serve_process, write_served_project

pytestmark = pytest.mark.slow

CRASH_TOOLS = '''
import os

import charter


@charter.tool("crash.exit", permissions=["kv:read"])
def crash_exit(code: int) -> dict:
    """End the process that runs it, as a tool with a bug or a C extension can."""
    os._exit(code)


@charter.tool("crash.sub", permissions=["kv:read"])
def crash_sub(code: int) -> dict:
    """The same, bound to the subprocess executor."""
    os._exit(code)
'''


def crash_project(root: Path) -> Project:
    project = write_served_project(root)
    (root / "crash_tools.py").write_text(CRASH_TOOLS)
    charter_yaml = root / "charter.yaml"
    text = charter_yaml.read_text().replace("[tools.py]", "[tools.py, crash_tools.py]")
    text = text.replace("kv.boom, kv.slow]", "kv.boom, kv.slow, crash.exit, crash.sub]")
    charter_yaml.write_text(text)
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + "bindings:\n  crash.sub: {executor: subprocess}\n")
    return project


def _call(url: str, key: str, ctx: str, tool: str, call_id: str, args: dict) -> httpx2.Response:
    return httpx2.post(
        f"{url}/v1/contexts/{ctx}/calls",
        json={"tool": tool, "call_id": call_id, "arguments": args},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def _context(url: str, key: str) -> str:
    made = httpx2.post(
        f"{url}/v1/contexts",
        json={"profile": "all"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return str(made.json()["context_id"])


def test_a_subprocess_tool_that_exits_fails_only_its_call(tmp_path: Path) -> None:
    project = crash_project(tmp_path / "proj")
    key = project.keys["app"]
    store = f"sqlite:///{project.root / '.charter' / 'charter.db'}"
    with spawn_serve_process(project.root, store) as (url, proc):
        ctx = _context(url, key)
        answer = _call(url, key, ctx, "crash.sub", "s1", {"code": 3})
        assert answer.status_code == 200, answer.text
        env = answer.json()
        assert env["status"] == "unknown", env
        assert env["error"]["reason"] == "WORKER_LOST", env
        assert "exited with status 3 without a response" in env["error"]["message"]
        # the server goes on serving
        assert proc.poll() is None
        after = _call(url, key, ctx, "kv.echo", "s2", {"payload": {"x": 1}})
        assert after.json()["status"] == "succeeded", after.text


def test_an_in_process_tool_that_exits_ends_the_server_and_its_call_is_unknown(
    tmp_path: Path,
) -> None:
    project = crash_project(tmp_path / "proj")
    key = project.keys["app"]
    store = f"sqlite:///{project.root / '.charter' / 'charter.db'}"
    with spawn_serve_process(project.root, store) as (url, proc):
        ctx = _context(url, key)
        with pytest.raises(httpx2.TransportError):
            _call(url, key, ctx, "crash.exit", "p1", {"code": 3})
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.returncode == 3  # the tool ended the server: nothing can catch os._exit
    # started again: the call its dead owner left dispatching is reported unknown
    with spawn_serve_process(project.root, store) as (url, proc):
        got = httpx2.get(
            f"{url}/v1/calls/{ctx}/p1", headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert got.status_code == 200, got.text
        row = got.json()
        assert row["state"] == "unknown", row
        again = _call(url, key, ctx, "crash.exit", "p1", {"code": 3}).json()
        assert again["status"] == "unknown", again  # its receipt: never run a second time
        assert again["error"]["reason"] == "DISPATCH_INTERRUPTED", again
        assert proc.poll() is None
