"""``charter test``, ``charter promote``, ``charter runs create`` and ``charter runs replay``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import typer
from rich.table import Table

from charter.cli import runs
from charter.cli._output import JSON_OPTION, console, print_json, reported_errors
from charter.project.build import Build, build_project, load_build, resolve_build_path
from charter.proof.context_tests import SuiteReport, run_tests
from charter.proof.promote import promote as do_promote
from charter.proof.replay import replay_run
from charter.proof.suite import suite_from_build
from charter.runtime import ledger_key_for
from charter.stores.factory import open_store

PROJECT_OPTION = typer.Option(Path("."), "--project", "-p", help="The project directory.")


def _build(ref: str | None, project: Path) -> Build:
    if ref is None:
        return build_project(project)
    return load_build(resolve_build_path(ref, project))


def _table(report: SuiteReport) -> None:
    table = Table(title="context tests")
    for col in ("test", "origin", "result", "failures"):
        table.add_column(col)
    for r in report.results:
        result = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
        table.add_row(r.name, r.origin, result, "\n".join(r.failures))
    console.print(table)
    console.print(f"{len(report.results) - len(report.failed)} passed, {len(report.failed)} failed")


def run_context_tests(
    build: str | None = typer.Option(None, "--build", help="A Build (file, digest, latest)."),
    project: Path = PROJECT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run the Build's context tests (nothing is dispatched); exit 1 if any fails."""
    with reported_errors(as_json):
        b = _build(build, project)
        report = run_tests(b, suite_from_build(b.document))
    if as_json:
        print_json({"ok": report.passed, **report.to_dict()})
    else:
        _table(report)
    raise typer.Exit(0 if report.passed else 1)


def promote(
    build: str = typer.Argument(..., help="The candidate Build (file, digest, latest)."),
    env: str = typer.Option(..., "--env", help="The environment to promote it for."),
    project: Path = PROJECT_OPTION,
    store: str = runs.STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Promote a Build if its tests, the promoted Build's tests and guards/ all pass."""
    with reported_errors(as_json):
        candidate = _build(build, project)
        key = ledger_key_for(project)

        async def main() -> Any:
            async with open_store(store, key=key) as s:
                return await do_promote(project, candidate, env, store=s)

        result = anyio.run(main)
    if as_json:
        print_json({"ok": result.promoted, **result.to_dict()})
    else:
        _table(result.report)
        verdict = "promoted" if result.promoted else "[red]refused[/]"
        console.print(f"{candidate.digest} {verdict} for {env} (ledger run {result.run_id})")
    raise typer.Exit(0 if result.promoted else 1)


def replay(
    run_id: str = typer.Argument(..., help="The run to replay."),
    build: str | None = typer.Option(
        None, "--build", help="A candidate Build; default: the project's latest Build."
    ),
    project: Path = PROJECT_OPTION,
    store: str = runs.STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Re-evaluate every recorded decision of a run against a Build; never dispatches."""
    with reported_errors(as_json):
        b = _build(build or "latest", project)
        key = ledger_key_for(project)

        async def main() -> Any:
            async with open_store(store, key=key, must_exist=True) as s:
                return await replay_run(s, run_id, b)

        report = anyio.run(main)
    if as_json:
        print_json(report.to_dict())
        return
    table = Table(title=f"replay of {run_id} against {b.digest[:19]}")
    for col in ("seq", "call", "tool", "recorded", "replayed", "reason"):
        table.add_column(col)
    for c in report.calls:
        style = "[red]" if c.changed else ""
        table.add_row(
            str(c.seq), c.call_id, c.tool, c.recorded, f"{style}{c.replayed}", c.reason or ""
        )
    console.print(table)
    console.print(f"{len(report.changed)} decision(s) would change; nothing was dispatched")


def register(app: typer.Typer) -> None:
    app.command("test")(run_context_tests)
    app.command("promote")(promote)
    runs.app.command("replay")(replay)
