"""``--help`` reads as prose: a docstring's source line breaks are not the terminal's (the
ragged lines of "a write that waits for an / operator's approval"), and no reStructuredText
markup shows through."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from charter.cli.app import _unwrapped, app


def _commands(command: Any, path: list[str]) -> list[list[str]]:
    found = [path]
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            found += _commands(sub, [*path, name])
    return found


def test_every_help_page_is_prose_without_markup() -> None:
    runner = CliRunner()
    paths = _commands(typer.main.get_command(app), [])
    assert len(paths) > 40
    for path in paths:
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "300"})
        assert shown.exit_code == 0, (path, shown.output)
        assert "``" not in shown.output, path
    listing = runner.invoke(app, ["--help"], env={"COLUMNS": "300"}).output
    line = next(x for x in listing.splitlines() if " demo " in x)
    assert "a write that waits for an operator's approval, an application" in line


def test_unwrapping_keeps_paragraphs_and_list_items() -> None:
    text = """First line
    goes on.

    - one item
      continued
    - two

    ``code`` here"""
    assert _unwrapped(text) == ("First line goes on.\n\n- one item continued\n- two\n\n`code` here")
