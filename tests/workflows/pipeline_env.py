"""The report-pipeline example initialised in a temporary directory, with an open runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from charter.project.build import build_project, save_build
from charter.project.init import init_project
from charter.runtime import Runtime, open_runtime
from charter.testing.clock import FakeClock


def pipeline_project(root: Path) -> Path:
    init_project(root, template="report-pipeline")
    save_build(build_project(root), root)
    return root


@asynccontextmanager
async def pipeline_runtime(
    root: Path, *, clock: FakeClock | None = None, store: str | None = None
) -> AsyncIterator[Runtime]:
    # a clock that moves: rows ordered by time then tie-broken differ between the stored and
    # the rebuilt projections when every timestamp is equal (see the report of issue 8)
    clock = clock or FakeClock(step=timedelta(milliseconds=1))
    async with open_runtime(
        root, store=store or f"sqlite:///{root / '.charter' / 'charter.db'}", clock=clock
    ) as rt:
        yield rt
