"""Every ``charter …`` command the documentation shows names a real command and real options.

``console`` transcripts are not run (they show output and abbreviate ids), so this checks
their commands against the CLI itself: each ``$ charter`` line of a ``console``, ``sh``,
``bash`` or ``shell`` block in README.md and docs/*.md — and each usage line (``charter runs ls
[--json]``, indented or in a bare fence) — must resolve to a command, and each ``--option`` it
passes must be one that command takes.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import typer

from charter.cli.app import app
from tests.docs.examples import ROOT, pages

_SHELLS = {"console", "sh", "bash", "shell"}
_SYNOPSIS = re.compile(r"^(    +|)charter [a-z]")  # a usage line, indented or in a bare fence


def synopsis(line: str) -> list[str]:
    """The words of a usage line (``charter runs cancel|fail RUN [--json]``): brackets
    dropped, the first of each ``a|b`` alternative."""
    words = line.split("  #", 1)[0].split()[1:]
    return [w.strip("[]()").split("|", 1)[0] for w in words if w.strip("[]()|")]


def documented_commands() -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for page in pages():
        inside, lang = False, ""
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith("```"):
                inside, lang = not inside, stripped[3:].strip() if not inside else ""
                continue
            if _SYNOPSIS.match(line) and (not inside or lang == ""):
                found.append((f"{page.relative_to(ROOT).as_posix()}:{number}", synopsis(stripped)))
                continue
            if not inside or lang not in _SHELLS:
                continue
            if lang == "console" and not stripped.startswith("$ "):
                continue  # a transcript's output line
            command = stripped.removeprefix("$ ")
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command):
                try:
                    words = shlex.split(part.split("  #", 1)[0], comments=True)
                except ValueError:  # a quote the line leaves open: words up to it suffice
                    words = part.split("'", 1)[0].split('"', 1)[0].split()
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # NAME=value before the command
                if words and words[0] == "charter":
                    where = f"{page.relative_to(ROOT).as_posix()}:{number}"
                    found.append((where, words[1:]))
    return found


def test_documented_commands_and_options_exist() -> None:
    root = typer.main.get_command(app)
    problems: list[str] = []
    commands = documented_commands()
    for where, words in commands:
        command: Any = root
        rest = list(words)
        while hasattr(command, "get_command") and rest and not rest[0].startswith("-"):
            sub = command.get_command(
                command.make_context("charter", [], resilient_parsing=True), rest[0]
            )
            if sub is None:
                problems.append(f"{where}: no command {rest[0]!r} in charter {' '.join(words)}")
                break
            command, rest = sub, rest[1:]
        else:
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            known |= {"--help", "--version"}
            for word in rest:
                option = word.split("=", 1)[0]
                if option.startswith("--") and option not in known:
                    problems.append(f"{where}: charter {' '.join(words)}: no option {option}")
    assert len(commands) > 20
    assert not problems, "\n".join(problems)
