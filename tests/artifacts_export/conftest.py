"""A served project whose tools write artifacts; runs with files made through the runtime."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from charter.runtime import open_runtime
from charter.server import create_app
from tests.artifacts_kernel.conftest import write_files_project
from tests.server._harness import Project, ThreadServer


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return write_files_project(tmp_path / "proj")


def new_run(root: Path, files: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """A run of principal ``app`` in which ``files.write`` wrote ``files``; (run, ids)."""

    async def go() -> tuple[str, list[str]]:
        async with open_runtime(root) as rt:
            ctx = await rt.resolve_context("app", "all")
            ids: list[str] = []
            for i, (name, text) in enumerate((files or {}).items()):
                env = await rt.call(
                    ctx.context_id, "files.write", f"w{i}", {"name": name, "text": text}, as_="app"
                )
                assert env.ok, env.error
                ids.extend(env.artifact_ids)
            return ctx.run_id, ids

    return anyio.run(go)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return write_files_project(tmp_path_factory.mktemp("served-export"))


@pytest.fixture(scope="module")
def server(served: Project) -> Iterator[ThreadServer]:
    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(served.root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        yield live
