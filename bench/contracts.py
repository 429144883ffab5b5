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
    python bench/contracts.py --write-results   # rewrite the "## contracts" section of
                                                 # bench/RESULTS.md with this run's figures
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable
from typing import Any

import jsonschema

from _results import write_section
from charter.contracts.canonical import Fingerprinter, canonical_bytes, canonical_bytes_of_plain
from charter.contracts.intake import Intake, parse_arguments
from charter.contracts.schema import compile_schema

GOAL = 0.25
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
    data = canonical_bytes_of_plain(parsed)
    assert data == canonical_bytes(parsed)
    keyed = hmac.new(b"bench-key-0123456789abcdef", digestmod=hashlib.sha256)

    def hmac_of(payload: bytes) -> str:
        mac = keyed.copy()
        mac.update(payload)
        return mac.hexdigest()

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
        "  part: canonical JSON (plain path)": lambda: canonical_bytes_of_plain(parsed),
        "  part: HMAC-SHA256 of it": lambda: hmac_of(data),
        "  (Fingerprinter.fingerprint, checked path)": lambda: fingerprinter.fingerprint(parsed),
    }


def measure(repeats: int, target_s: float) -> dict[str, list[float]]:
    """Microseconds per call of every repeat for every contender, repeats interleaved."""
    timers = {name: timeit.Timer(fn) for name, fn in contenders().items()}
    numbers: dict[str, int] = {}
    for name, timer in timers.items():
        count, elapsed = timer.autorange()
        numbers[name] = max(1, int(count * target_s / max(elapsed, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(numbers[name]) / numbers[name] * 1e6)
    return samples


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


def report(samples: dict[str, list[float]]) -> dict[str, Any]:
    figures = {name: statistics.median(values) for name, values in samples.items()}
    best = {name: min(values) for name, values in samples.items()}
    reference = figures["json.loads + jsonschema + FormatChecker"]
    intake = figures["charter Intake.accept"]
    return {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "microseconds_per_call": {k.strip(): round(v, 3) for k, v in figures.items()},
        "best_microseconds_per_call": {k.strip(): round(v, 3) for k, v in best.items()},
        "ratios": {
            "intake / reference_with_formats": round(intake / reference, 3),
            "intake / reference_without_formats": round(
                intake / figures["json.loads + jsonschema"], 3
            ),
            "intake / bare_call": round(intake / figures["bare function call"], 1),
            "best intake / best reference_with_formats": round(
                best["charter Intake.accept"] / best["json.loads + jsonschema + FormatChecker"], 3
            ),
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
        f"- load average at the end of the run (1, 5, 15 min): {result['load_average']}",
        f"- machine: `{result['machine']['uname']}`, nproc {result['machine']['nproc']}, "
        f"Python {result['machine']['python']}, jsonschema {result['machine']['jsonschema']}, "
        f"jsonschema_rs {result['machine']['jsonschema_rs']}",
        "- rerun: `.venv/bin/python bench/contracts.py` (`--check` fails when the goal is "
        "missed, `--write-results` rewrites this section)",
        "",
        "| contender | median µs per call | best µs per call |",
        "|---|---:|---:|",
    ]
    best = result["best_microseconds_per_call"]
    for name, value in result["microseconds_per_call"].items():
        lines.append(f"| {name} | {value:.2f} | {best[name]:.2f} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    for name, value in result["ratios"].items():
        lines.append(f"| {name} | {value} |")
    verdict = "met" if result["goal_met"] else "NOT met"
    lines += ["", f"Goal ({result['goal']}): **{verdict}**.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the goal is not met")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--write-results", action="store_true", help="rewrite RESULTS.md")
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--target-seconds", type=float, default=0.2, help="per repeat")
    args = parser.parse_args(argv)

    samples = measure(args.repeats, args.target_seconds)
    result = report(samples)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        width = max(len(name) for name in samples)
        for name, values in samples.items():
            median, best = statistics.median(values), min(values)
            print(f"{name:<{width}}  {median:9.2f} µs  (best {best:.2f})")
        for name, value in result["ratios"].items():
            print(f"{name:<{width}}  {value:9}")
        print(f"goal: {result['goal']}: {'met' if result['goal_met'] else 'NOT met'}")
    if args.write_results:
        write_section(HEADING, markdown(result, args.repeats))
    if args.check and not result["goal_met"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
