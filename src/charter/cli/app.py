"""The root Typer application; each command group lives in its own module."""

from __future__ import annotations

import typer

from charter._version import __version__
from charter.cli import (
    artifacts_cmds,
    audit_cmds,
    bench_cmds,
    chat_cmds,
    check_cmds,
    demo_cmds,
    disclosure_cmds,
    endings_cmds,
    kernel_cmds,
    mcp_cmds,
    project_cmds,
    proposals_cmds,
    runs,
    serve_cmds,
    tasks_cmds,
    workflow_cmds,
)

app = typer.Typer(
    name="charter",
    help=(
        "Charter — a governed tool-execution runtime for AI agents.\n\n"
        "Build a project into an immutable, content-addressed Build; run tool calls through "
        "the governed kernel; inspect and verify the tamper-evident run ledger."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

project_cmds.register(app)
kernel_cmds.register(app)
demo_cmds.register(app)
check_cmds.register(app)
serve_cmds.register(app)
mcp_cmds.register(app)
chat_cmds.register(app)
proposals_cmds.register(app)
workflow_cmds.register(app)
artifacts_cmds.register(app)
endings_cmds.register(app)
disclosure_cmds.register(runs.app)
tasks_cmds.register(app)
audit_cmds.register(app)
app.add_typer(runs.app, name="runs")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"charter {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_version,
        is_eager=True,
        help="Print Charter's version and exit.",
    ),
) -> None:
    """Charter — a governed tool-execution runtime for AI agents."""


app.add_typer(bench_cmds.app, name="bench")
