"""A subprocess driver: open the runtime on a project and run a list of steps.

    python tests/kernel/_driver.py '{"project": DIR, "store": URL, "steps": [...],
                                     "ready": PATH, "go": PATH}'

Opening the runtime reconciles calls a dead process left in flight, exactly as any start-up
does. With ``ready``/``go`` the driver, once open, creates the ``ready`` file and waits for
the ``go`` file to appear, so several drivers can be released together. It prints one JSON
object, ``{"results": [...]}``, one result per step:

* ``{"op": "context", "as": P, "profile": PROF}`` → ``{"context_id", "run_id"}``
* ``{"op": "call", "context": C, "tool": T, "call_id": I, "args": {...}, "as": P}`` → the
  envelope as a dict
* ``{"op": "row", "context": C, "call_id": I, "as": P}`` → the call row
* ``{"op": "approve", "approval_id": A, "as": P}`` → the approval row
* ``{"op": "reconcile_until", "context": C, "call_id": I, "as": P}`` → reconcile until the
  call is no longer ``dispatching``: ``{"changed": N, "state": S}``

``"as_host"`` makes the process pose as a replica on another host (so only its lease tells
whether it is alive) and ``"lease_ttl_s"`` shortens its lease.

With ``"fork": N`` the driver imports Charter once and forks N children that each run the
steps as above — separate processes with their own store connections, started in a fraction of
the time N interpreters take — with ``ready``/``go`` suffixed ``-<i>`` per child; each child
writes its JSON to ``<out>-<i>.json`` and the driver exits 0 only if every child did.

With ``"phases": [{"env": {...}, "steps": [...]}, ...]`` the driver forks one child per
phase, one after the other, each with the phase's extra environment (``CHARTER_FAULT`` …) and
steps, and prints ``{"phases": [{"exit": CODE, "results": [...] | null}, ...]}``: a crash test
runs the dying process and the fresh one after it without paying for two interpreters.

Fault points (``CHARTER_FAULT``) come from the environment of the process that runs the steps.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

from charter.runtime import Runtime, open_runtime

BARRIER_TIMEOUT_S = 120.0


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {path}")
        time.sleep(0.002)


async def _step(rt: Runtime, step: dict[str, Any]) -> Any:
    op = step["op"]
    if op == "context":
        ctx = await rt.resolve_context(step["as"], step["profile"])
        return {"context_id": ctx.context_id, "run_id": ctx.run_id}
    if op == "call":
        env = await rt.call(
            step["context"], step["tool"], step["call_id"], step["args"], as_=step["as"]
        )
        return env.to_dict()
    if op == "row":
        return (await rt.get_call(step["context"], step["call_id"], as_=step["as"])).to_dict()
    if op == "approve":
        return (await rt.approve(step["approval_id"], as_=step["as"])).to_dict()
    if op == "reconcile_until":  # reconcile until the call is no longer dispatching
        changed = 0
        deadline = time.monotonic() + float(step.get("timeout", 30))
        while time.monotonic() < deadline:
            changed += len(await rt.kernel.reconcile())
            row = await rt.get_call(step["context"], step["call_id"], as_=step["as"])
            if row.state != "dispatching":
                return {"changed": changed, "state": row.state}
            await asyncio.sleep(0.05)
        return {"changed": changed, "state": "dispatching"}
    raise SystemExit(f"unknown op {op!r}")


async def main(spec: dict[str, Any]) -> list[Any]:
    results = []
    async with open_runtime(spec["project"], store=spec["store"]) as rt:
        if spec.get("as_host"):  # pose as a replica on another host (its lease says so too)
            rt.kernel.state.owner["host"] = spec["as_host"]
        if spec.get("lease_ttl_s"):
            rt.kernel.lease.ttl = timedelta(seconds=float(spec["lease_ttl_s"]))
        if spec.get("ready"):
            Path(spec["ready"]).touch()
            _wait_for(Path(spec["go"]))
        for step in spec["steps"]:
            results.append(await _step(rt, step))
    return results


def _child(spec: dict[str, Any], out: Path, env: dict[str, str] | None = None) -> int:
    """Fork a child that runs ``spec`` and writes its results to ``out``; return its pid."""
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1  # the child: run, write the result, leave without cleanup handlers
    try:
        os.environ.update(env or {})
        out.write_text(json.dumps({"results": asyncio.run(main(spec))}))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def phased(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run each phase in its own forked child, in order; exit code and results of each."""
    done = []
    for i, phase in enumerate(spec["phases"]):
        out = Path(f"{spec['out']}-{i}.json")
        pid = _child({**spec, "steps": phase["steps"]}, out, phase.get("env"))
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        results = json.loads(out.read_text())["results"] if code == 0 else None
        done.append({"exit": code, "results": results})
    return done


def forked(spec: dict[str, Any]) -> int:
    """Fork ``spec["fork"]`` children, each running the steps; 0 if all of them succeeded."""
    children = [
        _child({**spec, "ready": f"{spec['ready']}-{i}"}, Path(f"{spec['out']}-{i}.json"))
        for i in range(int(spec["fork"]))
    ]
    failed = 0
    for pid in children:
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    given = json.loads(sys.argv[1])
    if given.get("fork"):
        raise SystemExit(forked(given))
    if given.get("phases"):
        sys.stdout.write(json.dumps({"phases": phased(given)}) + "\n")
        raise SystemExit(0)
    out = asyncio.run(main(given))
    sys.stdout.write(json.dumps({"results": out}) + "\n")
