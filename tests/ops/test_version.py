"""The version lives in one place, ``src/charter/_version.py``: the build reads it from there
(hatch's dynamic version), and ``charter --version``, ``charter.__version__`` and ``/healthz``
(``tests/server/test_api.py``) show it."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import charter
from charter import _version

ROOT = Path(__file__).resolve().parents[2]


def test_the_build_reads_the_version_from_the_one_module() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "src/charter/_version.py"
    assert charter.__version__ is _version.__version__


def test_charter_version_prints_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "charter"), "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.strip() == f"charter {_version.__version__}"
