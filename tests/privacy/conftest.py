"""The privacy tests' project: every canary secret planted, its variables set."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.privacy._project import Canaries, PrivacyProject, write_privacy_project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PrivacyProject:
    """A fresh privacy project with its canary secrets in the environment."""
    made = write_privacy_project(tmp_path / "privacy", Canaries.fresh())
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made
