"""Project commands: ``init``, ``build``, ``inspect``, ``diff``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the project commands to the root application."""
