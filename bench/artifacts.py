"""Benchmark: artifact write+register and read+verify against plain file I/O in the same run.

    python bench/artifacts.py [--repeats-small 200] [--repeats-large 15] [--check] [--json]
                              [--write-results] [--dir DIR]
    python bench/artifacts.py --many 5000 [--write-results] [--dir DIR]

Contenders, interleaved sample by sample so machine drift hits each alike:

* plain write: ``open(path, "xb")``, ``write``, ``os.fsync``, ``close``;
* Charter write+register: ``ArtifactService.write_bytes`` (local store: private temporary file
  in ``.staging/``, sha256 while writing, fsync, ``renameat2(RENAME_NOREPLACE)``, fsync of the
  directory, quota walk) + ``ArtifactService.register`` (stat + in-memory registry; the ledger
  append is measured by ``bench/ledger.py``);
* plain read: ``open(path, "rb")``, ``read``, ``hashlib.sha256``;
* Charter read+verify: ``ArtifactService.read_bytes`` (registry lookup, descriptor-relative
  ``O_NOFOLLOW`` open, fstat checks, read, sha256 compared with the registration).

for 1 KiB and 10 MiB files. Reports medians and ratios. Goal (issue 7): at most 1.5x the plain
path for 10 MiB, for both write and read.

``--many N`` (issue 20) writes and registers N small artifacts into one run with the default
quotas on (1 GiB, 10,000 files) and reports the median write+register cost of the first and the
last 500 — flat when the quotas are checked against running totals — beside one walk of the
run's files at the end, which is what every write paid before (the quota walk).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from _results import write_section
from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.records import Producer, Trust
from charter.artifacts.registry import MemoryRegistry
from charter.artifacts.service import ArtifactService

GOAL = 1.5
HEADING = "## artifacts"
MANY_HEADING = "## artifact quotas at scale"
SIZES = {"1 KiB": 1024, "10 MiB": 10 * 1024 * 1024}


def plain_write(path: Path, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def plain_read(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


async def measure(base: Path, repeats: dict[str, int]) -> dict[str, dict[str, float]]:
    plain_dir = base / "plain"
    plain_dir.mkdir()
    service = ArtifactService(
        store=LocalArtifactStore(base / "store", quota_bytes=None), registry=MemoryRegistry()
    )
    producer = Producer(task_id="bench", tool_id="bench.write", call_id="call-1")
    results: dict[str, dict[str, float]] = {}
    for label, size in SIZES.items():
        data = os.urandom(size)
        times: dict[str, list[float]] = {k: [] for k in ("pw", "cw", "pr", "cr")}
        for i in range(repeats[label]):
            tag = f"{label.replace(' ', '')}-{i}"
            t0 = time.perf_counter()
            plain_write(plain_dir / tag, data)
            t1 = time.perf_counter()
            stored = await service.write_bytes("run-bench", f"out/{tag}.bin", data)
            record = await service.register(
                "run-bench",
                stored,
                type="blob",
                media_type="application/octet-stream",
                producer=producer,
                trust=Trust.INTERNAL,
            )
            t2 = time.perf_counter()
            plain_read(plain_dir / tag)
            t3 = time.perf_counter()
            await service.read_bytes("run-bench", record.artifact_id)
            t4 = time.perf_counter()
            times["pw"].append(t1 - t0)
            times["cw"].append(t2 - t1)
            times["pr"].append(t3 - t2)
            times["cr"].append(t4 - t3)
        results[label] = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    return results


async def measure_many(base: Path, count: int) -> dict[str, float]:
    store = LocalArtifactStore(base / "store")  # default quotas: bytes and files
    service = ArtifactService(store=store, registry=MemoryRegistry())
    producer = Producer(task_id="bench", tool_id="bench.write", call_id="call-1")
    data = b"x" * 100
    times: list[float] = []
    for i in range(count):
        t0 = time.perf_counter()
        stored = await service.write_bytes("run-many", f"out/{i:05d}.txt", data)
        await service.register(
            "run-many",
            stored,
            type="blob",
            media_type="text/plain",
            producer=producer,
            trust=Trust.INTERNAL,
        )
        times.append(time.perf_counter() - t0)
    walks = []
    for _ in range(5):
        t0 = time.perf_counter()
        store.usage("run-many")
        walks.append(time.perf_counter() - t0)
    window = min(500, max(1, count // 10))
    return {
        "count": float(count),
        "window": float(window),
        "first_us": statistics.median(times[:window]) * 1e6,
        "last_us": statistics.median(times[-window:]) * 1e6,
        "walk_us": statistics.median(walks) * 1e6,
    }


def render_many(r: dict[str, float]) -> str:
    today = datetime.date.today().isoformat()
    n, w = int(r["count"]), int(r["window"])
    ratio = r["last_us"] / r["first_us"]
    return (
        "\n".join(
            [
                MANY_HEADING,
                "",
                f"`python bench/artifacts.py --many {n} --write-results` — {today}; "
                f"{n} artifacts of 100 bytes written and registered into one run of a local "
                "store with the default quotas on (1 GiB, 10,000 files); medians of the first "
                "and last "
                f"{w} writes. Shared, noisy machine.",
                "",
                "| measurement | µs |",
                "|---|---|",
                f"| write+register, first {w} | {r['first_us']:.0f} |",
                f"| write+register, last {w} (run holds ~{n} files) | {r['last_us']:.0f} |",
                f"| last / first | {ratio:.2f}x |",
                f"| one walk of the run's {n} files (what each write paid before) "
                f"| {r['walk_us']:.0f} |",
            ]
        )
        + "\n"
    )


def goals(results: dict[str, dict[str, float]]) -> list[tuple[str, bool, str]]:
    large = results["10 MiB"]
    out = []
    for what, plain, ours in (("write", "pw", "cw"), ("read", "pr", "cr")):
        ratio = large[ours] / large[plain]
        out.append(
            (
                f"10 MiB {what} <= {GOAL}x plain",
                ratio <= GOAL,
                f"{large[ours]:.0f} us vs {large[plain]:.0f} us ({ratio:.2f}x)",
            )
        )
    return out


def render(results: dict[str, dict[str, float]], repeats: dict[str, int]) -> str:
    today = datetime.date.today().isoformat()
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python "
    machine += platform.python_version()
    lines = [
        HEADING,
        "",
        f"`python bench/artifacts.py --write-results` — {today}; {machine}; medians of "
        f"{repeats['1 KiB']} (1 KiB) and {repeats['10 MiB']} (10 MiB) interleaved samples on the "
        "project's ext4 disk. Shared, noisy machine: the ratios are what matter.",
        "",
        "| size | plain write+fsync µs | write+register µs | ratio "
        "| plain read+sha256 µs | read+verify µs | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in results.items():
        lines.append(
            f"| {label} | {r['pw']:.0f} | {r['cw']:.0f} | {r['cw'] / r['pw']:.2f}x "
            f"| {r['pr']:.0f} | {r['cr']:.0f} | {r['cr'] / r['pr']:.2f}x |"
        )
    lines += ["", "| goal | met | measured |", "|---|---|---|"]
    for name, met, measured in goals(results):
        lines.append(f"| {name} | {'yes' if met else '**no**'} | {measured} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats-small", type=int, default=200)
    parser.add_argument("--repeats-large", type=int, default=15)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: /tmp)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write-results", action="store_true")
    parser.add_argument("--many", type=int, default=0, help="N artifacts in one run instead")
    args = parser.parse_args(argv)
    if args.many:
        with tempfile.TemporaryDirectory(dir=args.dir, prefix="charter-bench-") as tmp:
            many = anyio.run(measure_many, Path(tmp), args.many)
        text = render_many(many)
        print(json.dumps(many, indent=2) if args.json else text)
        if args.write_results:
            write_section(MANY_HEADING, text)
        return 0
    repeats = {"1 KiB": args.repeats_small, "10 MiB": args.repeats_large}
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="charter-bench-") as tmp:
        results = anyio.run(measure, Path(tmp), repeats)
    met = all(ok for _, ok, _ in goals(results))
    if args.json:
        payload: dict[str, Any] = {
            "results_us": results,
            "goals": [{"goal": n, "met": ok, "measured": m} for n, ok, m in goals(results)],
        }
        print(json.dumps(payload, indent=2))
    else:
        print(render(results, repeats))
    if args.write_results:
        write_section(HEADING, render(results, repeats))
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
