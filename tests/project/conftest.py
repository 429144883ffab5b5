from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from charter.project.init import init_project

WriteProject = Callable[..., Path]


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A fresh copy of the `charter init` example project."""
    root = tmp_path / "demo"
    init_project(root)
    return root


@pytest.fixture
def write_project(tmp_path: Path) -> WriteProject:
    """Write a project from {relative path: text}; texts are dedented."""

    def write(files: dict[str, str], name: str = "proj") -> Path:
        root = tmp_path / name
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return root

    return write
