"""A/B: the kernel (or MCP) benchmark for two source trees in the same sitting.

    python bench/ab.py A_TREE [B_TREE] [--rounds N] [--samples N] [--per-caller N]
                       [--bench kernel|mcp] [--json]

``A_TREE`` is a baseline checkout given by path (for example a worktree of the commit before
a change: ``git worktree add /work/wt-base <commit>``), ``B_TREE`` the tree to compare
(default: this checkout). Each round runs the benchmark once per tree, alternating the order
(A B, B A, A B, …), each run a fresh subprocess with ``PYTHONPATH=<tree>/src`` so it imports
that tree's ``charter``. Both sides run *this* checkout's benchmark script, so the workload
is the same; only the code under test differs.

Printed: per side, the median over rounds of each figure, and the ratio B/A of the medians —
for ``kernel``: the single-caller p50, CPU per call with 1 caller and with 32 callers, calls/s
at 32 callers, and the durable floors (the same for both sides, unless the machine drifted);
for ``mcp``: the ``charter mcp`` stdio round trip p50 and its ratio to the plain SDK server.

On a loaded machine trust CPU per call over latency, and more rounds over longer ones.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# (label, path into the kernel bench's JSON, True when higher is better)
KERNEL_FIGURES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("p50 µs, 1 caller", ("charter", "one_caller", "p50_us"), False),
    ("CPU µs per call, 1 caller", ("charter", "one_caller", "cpu_us_per_call"), False),
    ("CPU µs per call, 32 callers", ("charter", "callers32", "cpu_us_per_call"), False),
    ("calls/s, 32 callers", ("charter", "callers32", "per_s"), True),
    ("p50 µs, 32 callers", ("charter", "callers32", "p50_us"), False),
    (
        "CPU per call, 1 caller, in minimal pipelines (:memory:)",
        ("charter", "one_caller", "cpu_in_pipelines"),
        False,
    ),
    ("floor: two bare FULL commits p50 µs", ("floors", "two_commits", "p50_us"), False),
    ("floor: minimal pipeline p50 µs", ("floors", "pipeline", "p50_us"), False),
    (
        "floor: minimal pipeline CPU µs (:memory:)",
        ("floors", "pipeline_memory", "cpu_us_per_call"),
        False,
    ),
)
MCP_FIGURES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("charter mcp p50 ms", ("charter", "p50_ms"), False),
    ("plain SDK server p50 ms", ("plain", "p50_ms"), False),
    ("charter / plain p50", ("ratio_p50",), False),
)


def tree_src(tree: Path) -> Path:
    src = tree / "src"
    if not (src / "charter" / "__init__.py").is_file():
        raise SystemExit(f"{tree} is not a Charter source tree (no src/charter)")
    return src


def run_once(tree: Path, bench: str, args: argparse.Namespace) -> dict[str, Any]:
    """One benchmark run in a fresh interpreter importing ``tree``'s charter."""
    env = dict(os.environ)
    src = str(tree_src(tree))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if bench == "kernel":
        argv = [sys.executable, str(HERE / "kernel.py"), "--json"]
        argv += ["--samples", str(args.samples), "--per-caller", str(args.per_caller)]
    else:
        # bench/mcp.py starts `python -m charter mcp` with this PYTHONPATH: the server under
        # test is the tree's too
        argv = [sys.executable, str(HERE / "mcp.py"), "--json", "--calls", str(args.calls)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"the {bench} bench failed for {tree} (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def dig(doc: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = doc
    for key in path:
        value = value[key]
    return float(value)


def normalized(doc: dict[str, Any]) -> dict[str, Any]:
    """Add the single caller's CPU per call in units of the minimal pipeline's CPU on
    ``:memory:`` in the same run: a machine-speed yardstick that drifts with the load."""
    floor = doc["floors"]["pipeline_memory"]["cpu_us_per_call"]
    one = doc["charter"]["one_caller"]["cpu_us_per_call"]
    doc["charter"]["one_caller"]["cpu_in_pipelines"] = one / floor if floor else float("nan")
    return doc


def compare(
    runs: dict[str, list[dict[str, Any]]],
    figures: tuple[tuple[str, tuple[str, ...], bool], ...],
) -> list[dict[str, Any]]:
    rows = []
    for label, path, higher_better in figures:
        a = statistics.median(dig(r, path) for r in runs["A"])
        b = statistics.median(dig(r, path) for r in runs["B"])
        rows.append(
            {
                "figure": label,
                "A": a,
                "B": b,
                "ratio": b / a if a else float("nan"),
                "higher_is_better": higher_better,
                "A_runs": [dig(r, path) for r in runs["A"]],
                "B_runs": [dig(r, path) for r in runs["B"]],
            }
        )
    return rows


def render(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"A = {args.a}",
        f"B = {args.b}",
        f"{args.bench} bench, {args.rounds} rounds (alternating order), medians over rounds",
        "",
        "| figure | A | B | B/A |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['figure']} | {row['A']:.1f} | {row['B']:.1f} | {row['ratio']:.3f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="baseline source tree (A)")
    parser.add_argument("b", type=Path, nargs="?", default=HERE.parent, help="tree B (this one)")
    parser.add_argument("--bench", choices=("kernel", "mcp"), default="kernel")
    parser.add_argument("--rounds", type=int, default=4, help="runs per tree")
    parser.add_argument("--samples", type=int, default=1000, help="kernel: 1-caller samples")
    parser.add_argument("--per-caller", type=int, default=50, help="kernel: calls per caller")
    parser.add_argument("--calls", type=int, default=300, help="mcp: calls per server")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args()
    args.a, args.b = args.a.resolve(), args.b.resolve()
    for tree in (args.a, args.b):
        tree_src(tree)
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for r in range(args.rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            tree = args.a if side == "A" else args.b
            print(f"round {r + 1}/{args.rounds}: {side} ({tree})", file=sys.stderr, flush=True)
            doc = run_once(tree, args.bench, args)
            runs[side].append(normalized(doc) if args.bench == "kernel" else doc)
    rows = compare(runs, KERNEL_FIGURES if args.bench == "kernel" else MCP_FIGURES)
    if args.json:
        print(json.dumps({"a": str(args.a), "b": str(args.b), "figures": rows}, indent=2))
    else:
        print(render(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
