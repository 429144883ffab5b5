"""The report-pipeline tools: fetch a shipped CSV data set, summarise it, write a report.

Each tool writes its result as an artifact of the run through ``ctx.artifacts`` (create-only,
registered with its checksum when the call succeeds) and reads its inputs back verified.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path
from typing import Any, Literal

import charter

DATASETS = Path(__file__).resolve().parent.parent / "datasets"


def _files(ctx: charter.Context) -> Any:
    """The call's artifact writer (the in-process executor always gives one)."""
    if ctx.artifacts is None:
        raise RuntimeError("this tool needs an executor that provides ctx.artifacts")
    return ctx.artifacts


@charter.tool(
    "data.fetch",
    permissions=["pipeline:run"],
    artifacts={"writes": True, "media_types": ["text/csv"]},
)
def fetch(name: Literal["sales"], ctx: charter.Context) -> dict[str, Any]:
    """Retrieve a data set shipped with the project into the run as a CSV artifact."""
    data = (DATASETS / f"{name}.csv").read_bytes()
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    stored = _files(ctx).put(f"data/{name}.csv", data, media_type="text/csv", type="dataset")
    return {"path": stored.path, "rows": len(rows) - 1, "columns": rows[0]}


def _numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


@charter.tool(
    "stats.summarise",
    permissions=["pipeline:run"],
    artifacts={"writes": True, "inputs": ["dataset"], "media_types": ["application/json"]},
)
def summarise(dataset: str, ctx: charter.Context) -> dict[str, Any]:
    """Summary statistics (count, mean, min, max, standard deviation) per numeric column."""
    text = _files(ctx).read(dataset).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    columns: dict[str, Any] = {}
    for name in rows[0] if rows else []:
        values = _numeric([r[name] for r in rows])
        if values is None:
            columns[name] = {"kind": "text", "distinct": len({r[name] for r in rows})}
            continue
        columns[name] = {
            "kind": "number",
            "count": len(values),
            "mean": round(statistics.fmean(values), 4),
            "min": min(values),
            "max": max(values),
            "stdev": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
            "sum": round(sum(values), 4),
        }
    summary = {"rows": len(rows), "columns": columns}
    body = json.dumps(summary, indent=2, sort_keys=True).encode()
    stored = _files(ctx).put(
        "analysis/summary.json", body, media_type="application/json", type="summary"
    )
    return {
        "path": stored.path,
        "rows": len(rows),
        "numeric": sorted(n for n, c in columns.items() if c["kind"] == "number"),
    }


@charter.tool(
    "report.write",
    permissions=["pipeline:run"],
    artifacts={"writes": True, "inputs": ["summary"], "media_types": ["text/markdown"]},
)
def write(summary: str, title: str, ctx: charter.Context) -> dict[str, Any]:
    """Write a Markdown report from the summary statistics."""
    stats = json.loads(_files(ctx).read(summary))
    lines = [f"# {title}", "", f"{stats['rows']} rows.", ""]
    lines += ["| column | count | mean | min | max | stdev |", "|---|---|---|---|---|---|"]
    for name, col in sorted(stats["columns"].items()):
        if col["kind"] == "number":
            lines.append(
                f"| {name} | {col['count']} | {col['mean']} | {col['min']} | {col['max']} "
                f"| {col['stdev']} |"
            )
    text = [n for n, c in sorted(stats["columns"].items()) if c["kind"] == "text"]
    if text:
        lines += [
            "",
            "Text columns: "
            + ", ".join(f"{n} ({stats['columns'][n]['distinct']} distinct)" for n in text)
            + ".",
        ]
    body = ("\n".join(lines) + "\n").encode()
    stored = _files(ctx).put("reports/report.md", body, media_type="text/markdown", type="report")
    return {"path": stored.path, "bytes": len(body)}
