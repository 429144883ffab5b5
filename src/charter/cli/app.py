"""The root Typer application; each command group lives in its own module."""

from __future__ import annotations

import inspect
import re

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


_ITEM = re.compile(r"^(?:[-*•] |\d+[.)] )")


def _unwrapped(text: str) -> str:
    """A docstring as ``--help`` shows it: each paragraph's lines joined (the source wraps
    them at 100 columns; the terminal wraps them again), list items kept one per line, and
    ````code```` as `code` (the help is not reStructuredText)."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        items: list[str] = []
        for line in paragraph.splitlines():
            line = line.strip()
            if items and not _ITEM.match(line):
                items[-1] += " " + line
            else:
                items.append(line)
        paragraphs.append("\n".join(items))
    return "\n\n".join(paragraphs).replace("``", "`")


def _tidy_help(typer_app: typer.Typer) -> None:
    """Give every command and group of ``typer_app`` its unwrapped help (:func:`_unwrapped`)."""
    info = typer_app.info
    if isinstance(info.help, str):
        info.help = _unwrapped(info.help)
    for command in typer_app.registered_commands:
        text = command.help or (inspect.getdoc(command.callback) if command.callback else None)
        if text:
            command.help = _unwrapped(text)
    for group in typer_app.registered_groups:
        if isinstance(group.help, str):
            group.help = _unwrapped(group.help)
        if group.typer_instance is not None:
            _tidy_help(group.typer_instance)
    callback = typer_app.registered_callback
    if callback is not None:
        text = callback.help or (inspect.getdoc(callback.callback) if callback.callback else None)
        if isinstance(text, str):
            callback.help = _unwrapped(text)


_tidy_help(app)
