"""``charter bench …``: run the project's benchmark scripts (bench/*.py in a source checkout)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

from charter.cli._output import fail

app = typer.Typer(
    help="Benchmarks, each beside the bare floor it measures itself.", no_args_is_help=True
)


def _script(name: str) -> Path:
    bases = (Path.cwd(), Path(__file__).resolve().parents[3])
    found = next(
        (b / "bench" / f"{name}.py" for b in bases if (b / "bench" / f"{name}.py").is_file()), None
    )
    if found is None:
        fail(f"bench/{name}.py not found: run this from a Charter source checkout")
    return found


@app.command("ledger")
def ledger(
    check: bool = typer.Option(False, "--check", help="Exit 1 when a goal is missed."),
    events: int = typer.Option(1_000_000, "--events", min=2000, help="Size of the big run."),
    write_results: bool = typer.Option(
        False, "--write-results", help="Replace the ## ledger section of bench/RESULTS.md."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the raw measurements as JSON."),
) -> None:
    """Append latency, group-commit throughput, 1k vs 1M tail latency, verify throughput."""
    argv = [sys.executable, str(_script("ledger")), "--events", str(events)]
    argv += ["--check"] * check + ["--write-results"] * write_results + ["--json"] * as_json
    raise typer.Exit(subprocess.call(argv))


@app.command("kernel")
def kernel(
    check: bool = typer.Option(False, "--check", help="Exit 1 when a goal is missed."),
    quick: bool = typer.Option(False, "--quick", help="Fewer samples (about 30 s)."),
    profile: bool = typer.Option(False, "--profile", help="Add a cProfile of both loops."),
    write_results: bool = typer.Option(
        False, "--write-results", help="Replace the ## kernel section of bench/RESULTS.md."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the raw measurements as JSON."),
) -> None:
    """Governed call latency and 32-caller throughput beside bare commits and the MCP SDK."""
    argv = [sys.executable, str(_script("kernel"))]
    argv += ["--check"] * check + ["--quick"] * quick + ["--profile"] * profile
    argv += ["--write-results"] * write_results + ["--json"] * as_json
    raise typer.Exit(subprocess.call(argv))


def _passthrough(name: str, flags: dict[str, bool]) -> None:
    argv = [sys.executable, str(_script(name))]
    argv += [flag for flag, on in flags.items() if on]
    raise typer.Exit(subprocess.call(argv))


CHECK = typer.Option(False, "--check", help="Exit 1 when a goal is missed.")
JSON = typer.Option(False, "--json", help="Print the raw measurements as JSON.")


@app.command("contracts")
def contracts(
    check: bool = CHECK,
    write_results: bool = typer.Option(
        False, "--write-results", help="Replace the ## contracts section of bench/RESULTS.md."
    ),
    as_json: bool = JSON,
) -> None:
    """Strict parse + validate + fingerprint beside json.loads + jsonschema and a bare call."""
    _passthrough(
        "contracts", {"--check": check, "--write-results": write_results, "--json": as_json}
    )


@app.command("artifacts")
def artifacts(check: bool = CHECK, as_json: bool = JSON) -> None:
    """Artifact write+register and read+verify beside plain open/write/fsync and read/sha256."""
    _passthrough("artifacts", {"--check": check, "--json": as_json})
