"""The ``charter`` command line: the sync edge over the async core."""

from __future__ import annotations

from charter import telemetry
from charter.cli.app import app


def main() -> None:
    # Traces export when the standard OTEL_* variables ask for it (docs/operations.md).
    telemetry.configure_from_environment()
    app()


__all__ = ["app", "main"]
