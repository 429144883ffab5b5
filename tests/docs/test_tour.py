"""The README's short tour, followed line by line on a fresh project with the real ``charter``.

Every ``$`` line of the tour is run in order. An id the tour abbreviates (``apr-c25f…``,
``ctx-…``, ``adhoc-…``) is replaced by the newest id of that kind an earlier step printed — so
the test fails when a step does not print what the next one needs. The output lines the tour
shows must appear (``…`` standing for what varies). A step whose comment says "refused" must
fail with the code it names; every other step must succeed (``pending_approval`` exits 3).
Not run here: activating the venv (the checkout's ``charter`` is first on PATH instead),
``charter serve`` (runs until stopped; tests/server covers it) and the two demos (tests/cli).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.docs.examples import ROOT

NOT_RUN = ("charter serve", "charter demo ")
_COMMENT = re.compile(r"\s{2,}#\s?(?P<comment>.*)$")
_ABBREVIATED = re.compile(r"\b(?P<kind>[a-z]+)-[0-9a-f]*…")


def tour() -> list[tuple[str, str, list[str]]]:
    """(command, comment, expected output lines) of the README's tour."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## A short tour", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    steps: list[tuple[str, str, list[str]]] = []
    for line in block.splitlines():
        found = _COMMENT.search(line)
        comment = found["comment"] if found else ""
        bare = line[: found.start()] if found else line
        if bare.startswith("$ "):
            steps.append((bare[2:].strip(), comment, []))
        elif bare.strip():
            steps[-1][2].append(bare.strip())
    return steps


def expected(line: str) -> re.Pattern[str]:
    """An output line of the tour as a pattern: an abbreviated id or digest (``apr-c25f…``,
    ``sha256:8b18b409…``) stands for any of its kind, a bare ``…`` for anything."""
    pattern, last = "", 0
    for found in re.finditer(r"\b(?P<kind>[a-z0-9]+[-:])[0-9a-f]*…|…", line):
        pattern += re.escape(line[last : found.start()])
        kind = found["kind"]
        pattern += re.escape(kind) + "[0-9a-f]+" if kind else ".*"
        last = found.end()
    return re.compile(pattern + re.escape(line[last:]))


def newest(kind: str, printed: str) -> str:
    """The last ``kind-<12 hex>`` id in what the earlier steps printed."""
    ids = re.findall(rf"\b{kind}-[0-9a-f]{{12}}\b", printed)
    assert ids, f"no {kind} id printed by an earlier step"
    return str(ids[-1])


def test_the_readme_tour_works_as_printed(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "charter"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m charter "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(ROOT / "src"))
    env.update(COLUMNS="100", NO_COLOR="1")
    cwd, printed, ran = tmp_path, "", 0
    for command, comment, output in tour():
        if command.startswith(". ") or command.startswith(NOT_RUN):
            continue

        command = _ABBREVIATED.sub(lambda m, seen=printed: newest(m["kind"], seen), command)
        for part in command.split(" && "):
            argv = shlex.split(part)
            if argv[0] == "cd":
                cwd = cwd / argv[1]
                continue
            done = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            ran += 1
            printed += done.stdout
            said = done.stdout + done.stderr
            if "refused" in comment:
                code = comment.split("refused:", 1)[1].split()[0]
                assert done.returncode != 0, (part, said)
                assert code in said, (part, said)
            elif output and output[0].startswith("pending_approval"):
                assert done.returncode == 3, (part, said)
            else:
                assert done.returncode == 0, (part, said)
            for line in output:
                assert expected(line).search(said), (part, line, said)
    assert ran >= 10
