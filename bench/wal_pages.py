"""Pages a governed call writes: the SQLite WAL frames of its two commits, per table and index.

    python bench/wal_pages.py [--calls 40] [--warmup 300] [--json]

One runtime on a temp SQLite file (WAL, ``synchronous=FULL``, as deployed), the kernel
benchmark's project and tool (``bench/kernel.py``): ``--warmup`` calls, a checkpoint that
empties the WAL, then ``--calls`` governed calls whose frames are read back from the ``-wal``
file and named by the b-tree each page belongs to (SQLite's ``dbstat``). The figure does not
move with the machine's load: it is what each call costs in page writes (a 24-byte frame
header and a page each, ``pwrite`` twice), beside its two ``fdatasync``.

Why: after the two fsyncs, the pages each commit writes are the single caller's largest fixed
cost on this kind of disk (issue 25, bench/RESULTS.md "## kernel"). An index whose columns an
update does not change, or that holds rows no query asks for, costs a page per commit.
``PYTHONPATH=<tree>/src python bench/wal_pages.py`` measures another tree.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib.util
import json
import sqlite3
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _kernel_bench() -> Any:
    """bench/kernel.py as a module (its project, tool and ``Bench`` driver)."""
    spec = importlib.util.spec_from_file_location("bench_kernel", HERE / "kernel.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(HERE))  # its `_results` import
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(HERE))
    return module


def wal_frames(wal: bytes) -> list[tuple[int, bool]]:
    """(page number, ends a commit) of each frame in a WAL file's bytes."""
    page_size = struct.unpack(">I", wal[8:12])[0]
    frames, at = [], 32
    while at + 24 <= len(wal):
        page, size_after = struct.unpack(">II", wal[at : at + 8])
        frames.append((page, size_after != 0))
        at += 24 + page_size
    return frames


async def measure(calls: int, warmup: int) -> dict[str, Any]:
    from charter.runtime import open_runtime

    kb = _kernel_bench()
    tmp = Path(tempfile.mkdtemp(prefix="wal-pages-"))
    project = kb.write_project(tmp / "project")
    db = tmp / "charter.db"
    async with open_runtime(project, store=f"sqlite:///{db}") as rt:
        ctx = await rt.resolve_context("app", "bench")
        bench = kb.Bench(rt, ctx.context_id)
        for _ in range(warmup):
            await bench.call()
        side = sqlite3.connect(db)
        busy, _, _ = side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise SystemExit("the checkpoint could not empty the WAL (a reader held it)")
        for _ in range(calls):
            await bench.call()
        frames = wal_frames(Path(f"{db}-wal").read_bytes())
        names = dict(side.execute("SELECT pageno, name FROM dbstat").fetchall())
        side.close()
    by_tree = collections.Counter(names.get(page, f"page {page}") for page, _ in frames)
    commits = sum(1 for _, ends in frames if ends)
    return {
        "calls": calls,
        "commits": commits,
        "frames": len(frames),
        "frames_per_call": len(frames) / calls,
        "per_tree": {name: n / calls for name, n in by_tree.most_common()},
    }


def render(res: dict[str, Any]) -> str:
    lines = [
        f"{res['calls']} governed calls, {res['commits']} commits, {res['frames']} WAL frames: "
        f"**{res['frames_per_call']:.2f} pages per call**",
        "",
        "| b-tree | pages per call |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {n:.2f} |" for name, n in res["per_tree"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="calls measured (default 40)")
    parser.add_argument("--warmup", type=int, default=300, help="calls before (default 300)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    res = asyncio.run(measure(args.calls, args.warmup))
    print(json.dumps(res, indent=2) if args.json else render(res))


if __name__ == "__main__":
    main()
