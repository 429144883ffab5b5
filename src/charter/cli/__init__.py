"""The ``charter`` command line: the sync edge over the async core."""

from __future__ import annotations

from charter.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
