"""A flood of slow sync tools takes every tool thread of ``charter serve``; a write that
waits for a thread past its deadline never ran, so it must say so and let the run go on.

Before: sync tools ran on anyio's default thread pool, which the runtime's own thread work
shares — the write first waited behind the flood for a thread to take its run's lock file;
then, timed out while waiting for a thread to run in, it answered ``unknown`` / ``TIMEOUT``
("its effect may or may not have happened") although its function never started, and the
run's write lock was kept for a thread that never existed: every later write of the run
stayed ``dispatching`` for as long as the server lived. Now tools have a pool of their own,
the call is ``failed`` / ``TOOL_NOT_STARTED`` at its deadline (retryable, nothing ran) and
the run's next write runs. Executions are counted by the tools themselves (their journal
lines), against a real ``charter serve`` process.
"""

from __future__ import annotations

import json
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2

from charter.client import Client
from tests.server._harness import Project, spawn_serve, write_served_project

STAMP = '''

@charter.tool("kv.stamp", effect="write", permissions=["kv:write"], timeout_s=0.5)
def stamp(name: str) -> dict[str, Any]:
    """A quick write with a short deadline; journals that it ran."""
    _journal("kv.stamp", name=name)
    return {"name": name}
'''

FLOOD = 48  # more slow sync calls than the process has worker threads (40)


def stamp_project(root: Path) -> Project:
    project = write_served_project(root)
    tools = root / "tools.py"
    tools.write_text(tools.read_text() + textwrap.dedent(STAMP))
    yaml = (root / "charter.yaml").read_text().replace("kv.slow]", "kv.slow, kv.stamp]")
    (root / "charter.yaml").write_text(yaml)
    deploy = (root / "charter.deploy.yaml").read_text().replace("[kv.put]", "[kv.put, kv.stamp]")
    (root / "charter.deploy.yaml").write_text(deploy)
    return project


def stamped(root: Path) -> list[str]:
    journal = root / "journal.txt"
    lines = journal.read_text().splitlines() if journal.exists() else []
    return [e["name"] for e in map(json.loads, lines) if e["tool"] == "kv.stamp"]


def approved(app: Client, alice: Client, context_id: str, call_id: str) -> str:
    out = app.call(context_id, "kv.stamp", call_id, {"name": call_id})
    assert out.status.value == "pending_approval", out
    assert out.approval is not None
    alice.approve(str(out.approval["id"]))
    return str(out.approval["id"])


def test_a_write_that_never_got_a_thread_failed_and_the_run_goes_on(tmp_path: Path) -> None:
    project = stamp_project(tmp_path / "served")
    with (
        spawn_serve(project.root, "sqlite:///.charter/charter.db") as url,
        Client(url, project.keys["app"], timeout=60) as app,
        Client(url, project.keys["alice"]) as alice,
        ThreadPoolExecutor(FLOOD) as pool,
    ):
        ctx = app.resolve_context("all")["context_id"]
        first = approved(app, alice, ctx, "w1")
        second = approved(app, alice, ctx, "w2")
        # warm: the tools' module is imported, so the writes below only wait for a thread
        assert app.call(ctx, "kv.get", "warm", {"key": "k"}).status.value == "succeeded"
        flood_ctx = app.resolve_context("all")["context_id"]  # another run: no write lock

        def slow(i: int) -> str:
            with Client(url, project.keys["app"], timeout=60) as c:
                return c.call(flood_ctx, "kv.slow", f"s{i}", {"seconds": 3}).status.value

        flood = [pool.submit(slow, i) for i in range(FLOOD)]
        time.sleep(1.0)  # every worker thread is asleep in kv.slow now
        began = time.monotonic()
        out = app.call(ctx, "kv.stamp", "w1", {"name": "w1"}, approval_id=first)
        assert time.monotonic() - began < 1.8  # answered at its deadline (0.5 s)
        assert out.status.value == "failed", out
        assert out.error is not None
        assert (out.error["reason"], out.error["retryable"]) == ("TOOL_NOT_STARTED", True)
        assert [f.result() for f in flood] == ["succeeded"] * FLOOD
        # the run's next write runs: the lock was not kept for a thread that never existed
        nxt = app.call(ctx, "kv.stamp", "w2", {"name": "w2"}, approval_id=second)
        assert nxt.status.value == "succeeded", nxt
        assert stamped(project.root) == ["w2"]  # w1 never ran
        row = app.get_call(ctx, "w1")
        assert (row["state"], row["receipt"]["error"]["reason"]) == ("failed", "TOOL_NOT_STARTED")


HANG = '''

@charter.tool("kv.hang", permissions=["kv:read"], timeout_s=0.3)
def hang(seconds: float) -> dict[str, Any]:
    """A read that outlives its deadline: its thread stays held until it returns."""
    time.sleep(seconds)
    return {"slept": seconds}
'''


def _gauge(metrics: str, name: str) -> float:
    [value] = [line.split()[-1] for line in metrics.splitlines() if line.startswith(name + " ")]
    return float(value)


def test_a_live_server_shows_the_threads_timed_out_tools_still_hold(tmp_path: Path) -> None:
    """``charter serve``: two sync reads past their deadline answer ``unknown`` / ``TIMEOUT``
    and keep their threads; ``/metrics`` counts them busy and stuck and ``/readyz`` lists the
    ``tool_threads`` check (still ready: other tools run), until the tools return. A read is
    not tried again while its thread is held: before, the kernel's read retries made each
    hung read hold three threads."""
    project = write_served_project(tmp_path / "served")
    tools = project.root / "tools.py"
    tools.write_text(tools.read_text() + "\nimport time\n" + textwrap.dedent(HANG))
    yaml = (project.root / "charter.yaml").read_text().replace("kv.slow]", "kv.slow, kv.hang]")
    (project.root / "charter.yaml").write_text(yaml)
    with (
        spawn_serve(project.root, "sqlite:///.charter/charter.db") as url,
        Client(url, project.keys["app"], timeout=60) as app,
    ):
        ctx = app.resolve_context("all")["context_id"]
        for call_id in ("h1", "h2"):
            out = app.call(ctx, "kv.hang", call_id, {"seconds": 4})
            assert out.status.value == "unknown", out
            assert out.error is not None
            assert out.error["reason"] == "TIMEOUT"
        metrics = httpx2.get(f"{url}/metrics").text
        assert _gauge(metrics, "charter_tool_threads") == 40
        assert _gauge(metrics, "charter_tool_threads_busy") == 2
        assert _gauge(metrics, "charter_tool_threads_stuck") == 2
        ready = httpx2.get(f"{url}/readyz")
        assert ready.status_code == 200, ready.text
        [check] = [c for c in ready.json()["checks"] if c["name"] == "tool_threads"]
        assert check["ok"] is True

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            metrics = httpx2.get(f"{url}/metrics").text
            if _gauge(metrics, "charter_tool_threads_busy") == 0:
                break
            time.sleep(0.2)
        assert _gauge(metrics, "charter_tool_threads_stuck") == 0
