"""Benchmark: the cost of Charter's argument intake against a plain jsonschema reference.

Measures in ONE run, interleaved so that machine drift hits every contender alike:

1. a bare Python function call (the floor);
2. ``json.loads`` + ``jsonschema.Draft202012Validator.validate``, without and with a
   ``FormatChecker`` (the reference a team would write by hand);
3. Charter's ``Intake.accept``: strict parse + Draft 2020-12 validation with asserted
   formats + RFC 8785 canonical JSON + HMAC-SHA256 fingerprint;

plus the parts of (3) on their own. Reports per-call microseconds (median of the repeats)
and ratios. The goal (issue 2): the whole intake costs at most 0.25x the reference WITH
FormatChecker.

    python bench/contracts.py              # human-readable table
    python bench/contracts.py --json       # machine-readable
    python bench/contracts.py --check      # exit 1 when the goal is not met
    python bench/contracts.py --update-results   # rewrite the "## contracts" section of
                                                 # bench/RESULTS.md with this run's figures
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema

from charter.contracts.canonical import Fingerprinter, canonical_bytes
from charter.contracts.intake import Intake, parse_arguments
from charter.contracts.schema import compile_schema

GOAL = 0.25
RESULTS = Path(__file__).with_name("RESULTS.md")
HEADING = "## contracts"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 64},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "id": {"type": "string", "format": "uuid"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "email", "id"],
    "additionalProperties": False,
}
ARGUMENTS: dict[str, Any] = {
    "name": "Ada Lovelace",
    "age": 36,
    "email": "ada@example.com",
    "id": "123e4567-e89b-12d3-a456-426614174000",
    "tags": ["math", "engines"],
    "active": True,
}
TEXT = json.dumps(ARGUMENTS)


def contenders() -> dict[str, Callable[[], object]]:
    plain = jsonschema.Draft202012Validator(SCHEMA)
    formats = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    fingerprinter = Fingerprinter("bench", b"bench-key-0123456789abcdef")
    intake = Intake(SCHEMA, fingerprinter)
    compiled = compile_schema(SCHEMA)
    parsed = parse_arguments(TEXT)

    def tool(arguments: dict[str, Any]) -> dict[str, Any]:
        return arguments

    def reference_plain() -> None:
        plain.validate(json.loads(TEXT))

    def reference_formats() -> None:
        formats.validate(json.loads(TEXT))

    # sanity: every contender accepts the sample, and the intake rejects a bad one
    reference_formats()
    assert intake.accept(TEXT).arguments == ARGUMENTS
    assert not compiled.is_valid({**ARGUMENTS, "email": "nope"})

    return {
        "bare function call": lambda: tool(ARGUMENTS),
        "json.loads + jsonschema": reference_plain,
        "json.loads + jsonschema + FormatChecker": reference_formats,
        "charter Intake.accept": lambda: intake.accept(TEXT),
        "  part: strict parse": lambda: parse_arguments(TEXT),
        "  part: validate (jsonschema_rs)": lambda: compiled.is_valid(parsed),
        "  part: canonical JSON + fingerprint": lambda: fingerprinter.fingerprint(parsed),
        "  part: canonical JSON alone": lambda: canonical_bytes(parsed),
    }


def measure(repeats: int, target_s: float) -> dict[str, float]:
    """Median microseconds per call for every contender, repeats interleaved."""
    timers = {name: timeit.Timer(fn) for name, fn in contenders().items()}
    numbers: dict[str, int] = {}
    for name, timer in timers.items():
        count, elapsed = timer.autorange()
        numbers[name] = max(1, int(count * target_s / max(elapsed, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(numbers[name]) / numbers[name] * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def machine() -> dict[str, str]:
    try:
        uname = subprocess.run(["uname", "-a"], capture_output=True, text=True, check=True)
        kernel = uname.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        kernel = platform.platform()
    return {
        "uname": kernel,
        "nproc": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "jsonschema": importlib.metadata.version("jsonschema"),
        "jsonschema_rs": importlib.metadata.version("jsonschema_rs"),
    }


def report(figures: dict[str, float]) -> dict[str, Any]:
    reference = figures["json.loads + jsonschema + FormatChecker"]
    intake = figures["charter Intake.accept"]
    return {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "microseconds_per_call": {k.strip(): round(v, 3) for k, v in figures.items()},
        "ratios": {
            "intake / reference_with_formats": round(intake / reference, 3),
            "intake / reference_without_formats": round(
                intake / figures["json.loads + jsonschema"], 3
            ),
            "intake / bare_call": round(intake / figures["bare function call"], 1),
        },
        "goal": f"intake <= {GOAL} x reference_with_formats",
        "goal_met": intake <= GOAL * reference,
    }


def markdown(result: dict[str, Any], repeats: int) -> str:
    lines = [
        HEADING,
        "",
        "Strict parse + validate + fingerprint of a 6-field object (`bench/contracts.py`), "
        "against `json.loads` + `jsonschema` `Draft202012Validator.validate` measured in the "
        f"same run (median of {repeats} interleaved repeats).",
        "",
        f"- date: {result['date']}",
        f"- machine: `{result['machine']['uname']}`, nproc {result['machine']['nproc']}, "
        f"Python {result['machine']['python']}, jsonschema {result['machine']['jsonschema']}, "
        f"jsonschema_rs {result['machine']['jsonschema_rs']}",
        "- rerun: `.venv/bin/python bench/contracts.py` (`--check` fails when the goal is "
        "missed, `--update-results` rewrites this section)",
        "",
        "| contender | µs per call |",
        "|---|---:|",
    ]
    for name, value in result["microseconds_per_call"].items():
        lines.append(f"| {name} | {value:.2f} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    for name, value in result["ratios"].items():
        lines.append(f"| {name} | {value} |")
    verdict = "met" if result["goal_met"] else "NOT met"
    lines += ["", f"Goal ({result['goal']}): **{verdict}**.", ""]
    return "\n".join(lines)


def update_results(section: str) -> None:
    """Replace the ``## contracts`` section of RESULTS.md (or append it), keeping the rest."""
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == HEADING), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        before = "\n".join(lines[:start]).rstrip("\n")
        after = "\n".join(lines[end:])
        new = before + "\n\n" + section + ("\n" + after if after else "")
    RESULTS.write_text(new.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the goal is not met")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--update-results", action="store_true", help="rewrite RESULTS.md")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--target-seconds", type=float, default=0.2, help="per repeat")
    args = parser.parse_args(argv)

    figures = measure(args.repeats, args.target_seconds)
    result = report(figures)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        width = max(len(name) for name in figures)
        for name, value in figures.items():
            print(f"{name:<{width}}  {value:9.2f} µs")
        for name, value in result["ratios"].items():
            print(f"{name:<{width}}  {value:9}")
        print(f"goal: {result['goal']}: {'met' if result['goal_met'] else 'NOT met'}")
    if args.update_results:
        update_results(markdown(result, args.repeats))
    if args.check and not result["goal_met"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
