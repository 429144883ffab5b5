"""``charter runs …``: list, show, follow, verify and export run ledgers."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Runs and their ledgers: list, show, stream events, verify, export.",
    no_args_is_help=True,
)
