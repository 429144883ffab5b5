"""Every ``sh``/``bash``/``shell`` and ``python`` example in README.md and docs/*.md runs as shown.

Each page runs in its own temporary directory (all pages at once), its blocks in order (a
later block may use what an earlier one created), with the checkout's ``charter`` command (and
``python``) first on PATH and the checkout's ``src`` on ``sys.path``. Markers and the rules for
blocks: ``examples.py``.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import DEVNULL, STDOUT, Popen

import pytest

from tests.docs.examples import ROOT, Block, blocks, pages

RUNNER = Path(__file__).with_name("runner.py")
PAGES = [p for p in pages() if blocks(p)]
MAX_SKIPS = 8  # keep skips few: each needs a reason a reader can see in the page


def _shims(bin_dir: Path) -> None:
    bin_dir.mkdir()
    python = f'"{sys.executable}"'
    # the checkout's sources even where a client launches ``charter`` with a scrubbed
    # environment (the MCP SDK's stdio client keeps PATH and HOME, not PYTHONPATH)
    src = f'PYTHONPATH="{ROOT / "src"}"; export PYTHONPATH'
    for name, target in (("charter", f"{python} -m charter"), ("python", python)):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\n{src}\nexec {target} "$@"\n', encoding="utf-8")
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _steps(page: Path) -> list[dict[str, object]]:
    return [
        {"where": b.where, "lang": b.lang, "code": b.code, "setup": list(b.setup)}
        for b in blocks(page)
        if b.skip is None
    ]


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[Path, tuple[Popen[bytes], Path]]]:
    """Every page's runner, started at once (each in its own directory), so pages run in
    parallel; each test below waits for its own page."""
    started: dict[Path, tuple[Popen[bytes], Path]] = {}
    for page in PAGES:
        steps = _steps(page)
        if not steps:
            continue
        home = tmp_path_factory.mktemp(page.stem)
        _shims(home / "bin")
        (home / "work").mkdir()
        (home / "steps.json").write_text(json.dumps(steps), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "OTEL_"))}
        env["PATH"] = f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(ROOT / "src")
        env["NO_COLOR"] = "1"
        env["COLUMNS"] = "100"
        with (home / "output.txt").open("wb") as out:
            proc = Popen(
                [sys.executable, str(RUNNER), str(home / "steps.json")],
                cwd=home / "work",
                env=env,
                stdout=out,
                stderr=STDOUT,
                stdin=DEVNULL,
            )
        started[page] = (proc, home / "output.txt")
    yield started
    for proc, _ in started.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_page_examples_run_as_shown(
    page: Path, runs: dict[Path, tuple[Popen[bytes], Path]]
) -> None:
    if page not in runs:
        pytest.skip("every example of this page is marked docs-test: skip")
    proc, output = runs[page]
    returncode = proc.wait(timeout=300)
    said = output.read_text(encoding="utf-8", errors="replace")
    assert returncode == 0, said
    assert said.count("ran ") == len(_steps(page)), said


def test_skipped_examples_are_few_and_say_why() -> None:
    skipped: list[Block] = [b for p in pages() for b in blocks(p) if b.skip is not None]
    assert all(b.skip for b in skipped)
    assert len(skipped) <= MAX_SKIPS, [f"{b.where}: {b.skip}" for b in skipped]


def test_the_extractor_sees_markers_and_rejects_stray_ones(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "x.md"
    page.write_text(
        "# x\n\n<!-- docs-test: setup charter init demo -->\n```python\nprint(1)\n```\n\n"
        "<!-- docs-test: skip needs a model key -->\n```sh\ncharter chat\n```\n\n"
        "```console\n$ charter serve\n```\n\n   ```bash\n   echo indented\n   ```\n",
        encoding="utf-8",
    )
    import tests.docs.examples as ex

    root = ex.ROOT
    ex.ROOT = tmp_path
    try:
        found = blocks(page)
        assert [(b.lang, b.code, b.setup, b.skip) for b in found] == [
            ("python", "print(1)\n", ("charter init demo",), None),
            ("sh", "charter chat\n", (), "needs a model key"),
            ("sh", "echo indented\n", (), None),
        ]
        page.write_text("<!-- docs-test: skip -->\n```sh\nx\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match="without a reason"):
            blocks(page)
        page.write_text("<!-- docs-test: skip why -->\ntext\n```sh\nx\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match="right before"):
            blocks(page)
    finally:
        ex.ROOT = root
