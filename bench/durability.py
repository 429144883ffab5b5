"""What durability costs a governed call in CPU: the single caller at ``synchronous=FULL`` (as
deployed) beside the same runtime with its commits at ``synchronous=OFF`` (no fsync; for this
measurement only), and the two bare FULL commits beside the same commits at OFF.

    python bench/durability.py [--rounds 10] [--block 200] [--json]

Two runtimes on two SQLite files in one process, one caller each, in alternating blocks of
``--block`` calls; CPU is ``time.process_time`` (all threads, user and system) over each
block. The store is opened as the runtime opens it; for the OFF runtime only, the writer's
connection is switched to ``synchronous=OFF`` right after it is made (the benchmark patches
``charter.stores.sqlite_batch._connect``, which also exists in the commit before the lean-path
work, so ``PYTHONPATH=<tree>/src python bench/durability.py`` measures either tree).

Why: issue 25's goal of a quarter of the earlier CPU per call with one caller includes the CPU
the kernel spends in ``fsync`` and around it, which no change to Charter's Python removes. The
difference FULL − OFF is that share; OFF alone is the part the call path's code decides.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

# The kernel bench's helpers, imported from bench/ (Python puts it first on sys.path for a
# script), where bench/mcp.py would shadow the mcp package that charter.runtime imports
# (bench/kernel.py takes bench/ off sys.path itself when it is first there).
from kernel import Bench, write_project


def _bare_commits(path: Path, synchronous: str, n: int) -> float:
    """CPU µs per pair of small insert + commit (WAL) at ``synchronous``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, data BLOB)")
    cpu = time.process_time()
    for _ in range(n):
        for _ in range(2):
            conn.execute("BEGIN")
            conn.execute("INSERT INTO bare (data) VALUES (?)", (b"x" * 300,))
            conn.execute("COMMIT")
    took = time.process_time() - cpu
    conn.close()
    return took / n * 1e6


async def _open(project: Path, db: Path, *, off: bool) -> tuple[Any, Bench]:
    from charter.runtime import open_runtime
    from charter.stores import sqlite as sqlite_store
    from charter.stores import sqlite_batch

    made = sqlite_batch._connect

    def connect(path: str, *, readonly: bool) -> sqlite3.Connection:
        conn = made(path, readonly=readonly)
        if not readonly:
            conn.execute("PRAGMA synchronous = OFF")
        return conn

    if off:
        sqlite_batch._connect = connect
        sqlite_store._connect = connect  # type: ignore[attr-defined]
    try:
        cm = open_runtime(project, store=f"sqlite:///{db}")
        rt = await cm.__aenter__()
        ctx = await rt.resolve_context("app", "bench")
        bench = Bench(rt, ctx.context_id)
        await bench.sequential(200)  # warm up (the writer connection is open by now)
    finally:
        sqlite_batch._connect = made
        sqlite_store._connect = made  # type: ignore[attr-defined]
    return cm, bench


async def run(rounds: int, block: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="charter-bench-durability-") as tmp_name:
        tmp = Path(tmp_name)
        project = write_project(tmp / "project")
        full_cm, full = await _open(project, tmp / "full.db", off=False)
        off_cm, off = await _open(project, tmp / "off.db", off=True)
        cpu: dict[str, list[float]] = {"full": [], "off": [], "bare_full": [], "bare_off": []}
        p50: dict[str, list[float]] = {"full": [], "off": []}
        try:
            for i in range(rounds):
                order = (
                    (("full", full), ("off", off)) if i % 2 == 0 else (("off", off), ("full", full))
                )
                for name, bench in order:
                    lat = await bench.sequential(block)
                    cpu[name].append(bench.cpu_per_call * 1e6)
                    p50[name].append(statistics.median(lat) * 1e6)
                cpu["bare_full"].append(_bare_commits(tmp / "bare_full.db", "FULL", block))
                cpu["bare_off"].append(_bare_commits(tmp / "bare_off.db", "OFF", block))
        finally:
            await off_cm.__aexit__(None, None, None)
            await full_cm.__aexit__(None, None, None)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "rounds": rounds,
        "block": block,
        "cpu_us_per_call": {"full": med["full"], "off": med["off"]},
        "durability_cpu_us_per_call": med["full"] - med["off"],
        "p50_us": {k: statistics.median(v) for k, v in p50.items()},
        "bare_two_commits_cpu_us": {"full": med["bare_full"], "off": med["bare_off"]},
        "bare_durability_cpu_us": med["bare_full"] - med["bare_off"],
        "nproc": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=200, help="calls per block")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = asyncio.run(run(args.rounds, args.block))
    if args.json:
        print(json.dumps(out))
        return 0
    c, b = out["cpu_us_per_call"], out["bare_two_commits_cpu_us"]
    print(
        f"governed call, 1 caller: CPU {c['full']:.0f} µs per call at FULL, {c['off']:.0f} at OFF"
    )
    print(f"  durability's share: {out['durability_cpu_us_per_call']:.0f} µs per call")
    print(f"  p50 {out['p50_us']['full']:.0f} µs at FULL, {out['p50_us']['off']:.0f} at OFF")
    print(f"two bare commits: CPU {b['full']:.0f} µs at FULL, {b['off']:.0f} at OFF")
    print(f"  durability's share: {out['bare_durability_cpu_us']:.0f} µs per pair")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
