"""Fixtures shared across test packages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``charter init demo``, run once per session by the real executable. Tests that only
    need a fresh demo project to start from copy it (:func:`copy_demo`) instead of starting
    the executable again; the tests of ``charter init`` itself still run it each time."""
    from tests.cli.test_first_hour import charter

    parent = tmp_path_factory.mktemp("demo-template")
    made = charter("init", "demo", cwd=parent)
    assert made.returncode == 0, made.stderr
    return parent / "demo"


def copy_demo(template: Path, parent: Path) -> Path:
    """A private copy of the demo project at ``parent/demo``, file modes kept (its secrets
    stay 0600)."""
    return Path(shutil.copytree(template, parent / "demo", symlinks=True))
