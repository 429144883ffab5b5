from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from charter.artifacts.ledger_registry import LedgerRegistry
from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.service import ArtifactService
from charter.ledger.chain import LedgerKey
from charter.project.build import Build, build_project
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from charter.workflows.service import WorkflowRuns
from tests.workflows._project import write_catalog_project

KEY = LedgerKey("test-key", b"k" * 32)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Env:
    root: Path
    build: Build
    store: MemoryStore
    artifacts: ArtifactService
    runs: WorkflowRuns


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    root = write_catalog_project(tmp_path / "p")
    build = build_project(root)
    clock = FakeClock(step=timedelta(0))
    store = MemoryStore(key=KEY, clock=clock)
    artifacts = ArtifactService(
        store=LocalArtifactStore(tmp_path / "artifacts"), registry=LedgerRegistry(store)
    )
    runs = WorkflowRuns(build=build, store=store, artifacts=artifacts)  # type: ignore[arg-type]
    return Env(root=root, build=build, store=store, artifacts=artifacts, runs=runs)
