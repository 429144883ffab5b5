"""Extract the runnable examples of README.md and docs/*.md.

A fenced block tagged ``sh``, ``bash``, ``shell`` or ``python`` is an example that must run as
shown. ``console`` blocks are transcripts (commands with their output and ``…`` for the ids a
run prints) and are not run. An HTML comment right before a block changes how it is run:

``<!-- docs-test: skip REASON -->``
    the block is not run (it needs a real model key, runs forever, installs packages); the
    reason is required and the test lists every skip.
``<!-- docs-test: setup COMMAND -->``
    COMMAND (one line, or the lines up to ``-->``) runs in bash first: ``charter init demo``,
    or a server started in the background with its output sent to a file. Variables it
    exports are seen by the page's later blocks; whatever it leaves running is stopped when
    the page is done.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<lang>[\w+-]*)\s*$")
_MARK = re.compile(
    r"^\s*<!--\s*docs-test:\s*(?P<kind>skip|setup)\b[ \t]*(?P<arg>.*?)\s*-->\s*$", re.S
)
_MARK_START = re.compile(r"^\s*<!--\s*docs-test:")


@dataclass(frozen=True)
class Block:
    page: str  # README.md or docs/x.md
    line: int  # line of the opening fence
    lang: str  # "sh" or "python"
    code: str
    setup: tuple[str, ...] = ()
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The runnable blocks of one page, in order, with the markers that precede each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    name = page.relative_to(ROOT).as_posix()
    found: list[Block] = []
    setup: list[str] = []
    skip: str | None = None
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if _MARK_START.match(lines[i]):
            end = i
            while end < len(lines) and "-->" not in lines[end]:
                end += 1
            mark = _MARK.match("\n".join(lines[i : end + 1]))
            if mark is None:
                raise ValueError(f"{name}:{i + 1}: unknown docs-test marker")
            i = end
            if mark["kind"] == "skip":
                if not mark["arg"]:
                    raise ValueError(f"{name}:{i + 1}: docs-test skip without a reason")
                skip = mark["arg"]
            else:
                setup.append(mark["arg"])
            i += 1
            continue
        if fence:
            indent, ticks = len(fence["indent"]), fence["fence"]
            body: list[str] = []
            j = i + 1
            while j < len(lines) and lines[j].strip() != ticks:
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            lang = RUN_LANGS.get(fence["lang"])
            if lang is not None:
                code = "\n".join(body) + "\n"
                found.append(Block(name, i + 1, lang, code, tuple(setup), skip))
            elif setup or skip:
                raise ValueError(f"{name}:{i + 1}: docs-test marker before a block that never runs")
            setup, skip = [], None
            i = j + 1
            continue
        if lines[i].strip() and (setup or skip):
            raise ValueError(f"{name}:{i + 1}: a docs-test marker must come right before its block")
        i += 1
    return found
