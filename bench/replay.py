"""Replay + verify of a 100,000-event run, beside a bare read-and-hash loop in the same run.

Records a run through the kernel (an in-process echo tool; SQLite store unless ``--memory``)
until it holds at least ``--events`` events, then measures, best of ``--repeat``:

* bare: read every stored event row through the store in batches and SHA-256 its bytes (no
  parsing, no checks);
* replay + verify: exactly what ``charter runs replay`` runs —
  :func:`charter.proof.verified.replay_verified`: one read of the run that verifies it
  (chain, frames, lifecycles, projections rebuilt and compared, head MAC) and parses every
  event once, then re-decides every call against the Build (``replay_events``) and evaluates
  the run (``evaluate_events``).

Prints events/s for both and the ratio (goal: replay + verify ≥ 50 % of the bare loop).
Usage: ``python bench/replay.py [--events 100000] [--repeat 3] [--json] [--memory]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio

from charter.contracts.canonical import Fingerprinter
from charter.executors.python import PythonExecutor
from charter.kernel.authorize import Enablement
from charter.kernel.kernel import Kernel
from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.redaction import Redactor
from charter.kernel.settings import KernelSettings
from charter.ledger.chain import LedgerKey
from charter.project.build import build_project
from charter.proof.verified import replay_verified
from charter.stores.sqlite import SQLiteStore

TOOLS = '''
import charter

@charter.tool("bench.echo", permissions=["bench:read"])
def echo(n: int) -> dict:
    """Echo n."""
    return {"n": n}
'''
CONFIG = """
name: replay-bench
tools: {python: [tools.py]}
profiles:
  all: {include: [bench.echo]}
"""
KEY = LedgerKey("bench", b"b" * 32)
WHO = Principal(
    name="bench", tenant="t", kind=PrincipalKind.APPLICATION, permissions=frozenset({"bench:read"})
)


async def record(root: Path, store: Any, target: int) -> tuple[str, Any]:
    build = build_project(root)
    redactor = Redactor()
    kernel = Kernel(
        build=build,
        store=store,
        fingerprinter=Fingerprinter("fp", b"f" * 32),
        executors={
            "python": PythonExecutor(
                redact_message=redactor.message_redactor(),
                root=root,
                entrypoints={t: b.entrypoint for t, b in build.tools.items() if b.entrypoint},
            )
        },
        bindings={},
        settings=KernelSettings(enablement=Enablement(), run_call_budget=10_000_000),
        redactor=redactor,
    )
    ctx = await kernel.resolve_context(WHO, "all")
    i = 0
    while True:
        head = await store.head(ctx.run_id)
        if head is not None and head.seq >= target:
            return ctx.run_id, build
        for _ in range(500):
            await kernel.call(ctx.context_id, "bench.echo", f"c{i}", {"n": i}, principal=WHO)
            i += 1


async def bare(store: Any, run_id: str) -> int:
    n, after = 0, 0
    while True:
        rows = await store.read_stored(run_id, after=after, limit=5000)
        if not rows:
            return n
        for row in rows:
            hashlib.sha256(row.data.encode() if isinstance(row.data, str) else row.data).digest()
            n += 1
        after = rows[-1].seq


async def replay_verify(store: Any, run_id: str, build: Any) -> int:
    """What ``charter runs replay`` runs: one verified read, then replay and evaluation."""
    got = await replay_verified(store, run_id, build, KEY)
    assert got.ok, got.verify.message
    assert got.replay is not None
    assert got.replay.changed == ()
    return got.verify.events


def _store(root: Path, memory: bool) -> Any:
    if memory:
        from contextlib import asynccontextmanager

        from charter.stores.memory import MemoryStore

        @asynccontextmanager
        async def opened() -> Any:
            yield MemoryStore(key=KEY)

        return opened()
    return SQLiteStore.open(root / "bench.db", key=KEY)


async def main(events: int, repeat: int, memory: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "charter.yaml").write_text(textwrap.dedent(CONFIG))
        (root / "tools.py").write_text(textwrap.dedent(TOOLS))
        async with _store(root, memory) as store:
            t0 = time.perf_counter()
            run_id, build = await record(root, store, events)
            recorded_s = time.perf_counter() - t0
            best_bare = best_replay = float("inf")
            n = 0
            for _ in range(repeat):
                t = time.perf_counter()
                n = await bare(store, run_id)
                best_bare = min(best_bare, time.perf_counter() - t)
                t = time.perf_counter()
                await replay_verify(store, run_id, build)
                best_replay = min(best_replay, time.perf_counter() - t)
    return {
        "events": n,
        "store": "memory" if memory else "sqlite",
        "record_s": round(recorded_s, 1),
        "bare_events_per_s": round(n / best_bare),
        "replay_verify_events_per_s": round(n / best_replay),
        "ratio": round(best_bare / best_replay, 3),
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--memory", action="store_true", help="the in-memory store")
    args = ap.parse_args()
    out = anyio.run(main, args.events, args.repeat, args.memory)
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
