"""``charter check``: every tool of the Build and its state — ready, not bound, not ready.

For each tool: its state, the executor, the Build's version and contract digest against what
the executor reports, and the reason when it is not ready (or not bound: nothing in the
deployment serves it, so it is offered nowhere). Exit code 0 when every required tool is
ready, 1 otherwise (optional tools that are not ready and tools that are not bound are shown
but do not fail).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import JSON_OPTION, console, print_json, print_table, reported_errors
from charter.kernel.readiness_port import ReadinessReport
from charter.runtime import check_readiness


def _short(digest: str | None) -> str:
    return digest[:19] if digest else "-"


_STATE = {"ready": "[green]ready[/]", "not_ready": "[red]not ready[/]", "not_bound": "not bound"}


def _print(report: ReadinessReport) -> None:
    table = Table(title="Readiness", title_justify="left")
    for col in ("tool", "state", "executor", "required", "expected", "reported", "reason"):
        table.add_column(col, overflow="fold")
    for t in report.tools:
        where = (
            t.executor
            + (f" {t.endpoint}" if t.endpoint else "")
            + (f" → {t.address}" if t.address else "")
        )
        # an executor's reported version or message is not ours to style: escaped
        table.add_row(
            escape(t.tool_id),
            _STATE[t.status],
            escape(where) if t.bound else "-",
            ("yes" if t.required else "no") if t.bound else "-",
            escape(f"{t.expected_version} {_short(t.expected_digest)}"),
            escape(f"{t.reported_version or '-'} {_short(t.reported_digest)}"),
            escape(f"{t.reason}: {t.message}" if t.reason else (t.message or "")),
        )
    print_table(table)
    unbound = report.not_bound()
    if unbound:
        console.print(
            f"not bound (not offered anywhere): {', '.join(t.tool_id for t in unbound)}",
            markup=False,
        )
    if not report.tools:
        console.print("the Build has no tools")
    elif report.ready:
        console.print("[green]every required tool is ready[/]")
    else:
        missing = ", ".join(t.tool_id for t in report.not_ready() if t.required)
        console.print(f"[red]required tools not ready:[/] {escape(missing)}")


def check(
    project: Path = typer.Option(Path("."), "--project", "-p", help="The project directory."),
    deploy: Path | None = typer.Option(
        None,
        "--deploy",
        envvar="CHARTER_DEPLOY",
        help="Deployment file (default: charter.deploy.yaml beside charter.yaml).",
    ),
    build: str | None = typer.Option(
        None, "--build", help="Check this Build (file, digest or 'latest') instead of the source."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """List every tool with its state (ready / not bound / not ready and why): executors
    reachable, versions and contract digests equal to the Build's."""
    with reported_errors(as_json):
        report = asyncio.run(check_readiness(project, deploy=deploy, build=build))
    if as_json:
        print_json(report.to_dict())
    else:
        _print(report)
    raise typer.Exit(0 if report.ready else 1)


def register(app: typer.Typer) -> None:
    app.command()(check)
