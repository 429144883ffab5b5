"""Tools that write through ``ctx.artifacts``: registration, rollback, immutability, inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.artifacts import LocalArtifactStore
from charter.errors import Failure
from charter.runtime import Runtime, open_runtime
from tests.server._harness import Project

pytestmark = pytest.mark.anyio


def _run_dir(project: Project, run_id: str) -> Path:
    return project.root / ".charter" / "artifacts" / run_id


async def _ctx(rt: Runtime) -> tuple[str, str]:
    ctx = await rt.resolve_context("app", "all")
    return ctx.context_id, ctx.run_id


async def test_a_written_file_is_registered_and_listed_in_the_envelope(project: Project) -> None:
    async with open_runtime(project.root) as rt:
        context_id, run_id = await _ctx(rt)
        env = await rt.call(
            context_id, "files.write", "c1", {"name": "r/report.md", "text": "# hi"}, as_="app"
        )
        assert env.ok, env.error
        assert len(env.artifact_ids) == 1
        record = await rt.artifacts.registry.get(run_id, env.artifact_ids[0])
        assert record is not None
        assert (record.path, record.media_type, record.type, record.trust.value) == (
            "r/report.md",
            "text/markdown",
            "report",
            "internal",
        )
        assert (record.producer.tool_id, record.producer.call_id) == ("files.write", "c1")
        assert await rt.artifacts.read_bytes(run_id, record.artifact_id) == b"# hi"
        # the receipt lists the same ids (a repeated call is answered from it)
        again = await rt.call(
            context_id, "files.write", "c1", {"name": "r/report.md", "text": "# hi"}, as_="app"
        )
        assert again.metrics.cached
        assert again.artifact_ids == env.artifact_ids
        row = await rt.get_call(context_id, "c1", as_="app")
        assert row.receipt is not None
        assert row.receipt["artifact_ids"] == list(env.artifact_ids)
        # the registration and the outcome were appended together
        events = [e.type for e in await rt.store.read_stored(run_id, after=0)]
        i = events.index("artifact_registered")
        assert events[i + 1] == "tool_progress"


async def test_a_failing_tools_files_are_gone(project: Project) -> None:
    async with open_runtime(project.root) as rt:
        context_id, run_id = await _ctx(rt)
        env = await rt.call(context_id, "files.boom", "c1", {"name": "out.txt"}, as_="app")
        assert env.status == "failed"
        assert env.artifact_ids == ()
        run_dir = _run_dir(project, run_id)
        visible = [p for p in run_dir.rglob("*") if p.is_file() and ".staging" not in p.parts]
        assert visible == []
        assert list(await rt.artifacts.registry.list(run_id)) == []


async def test_an_undeclared_media_type_fails_the_call(project: Project) -> None:
    async with open_runtime(project.root) as rt:
        context_id, _run_id = await _ctx(rt)
        env = await rt.call(context_id, "files.undeclared", "c1", {}, as_="app")
        assert env.status == "failed"
        assert env.error is not None
        assert env.error["reason"] == "ARTIFACT_MEDIA_TYPE_UNDECLARED"


async def test_a_registered_artifact_cannot_be_overwritten_by_any_path(project: Project) -> None:
    async with open_runtime(project.root) as rt:
        context_id, run_id = await _ctx(rt)
        first = await rt.call(
            context_id, "files.write", "c1", {"name": "a.md", "text": "one"}, as_="app"
        )
        assert first.ok
        # the kernel's writer: a second call writing the same name fails, the file is intact
        second = await rt.call(
            context_id, "files.write", "c2", {"name": "a.md", "text": "two"}, as_="app"
        )
        assert second.status == "failed"
        assert second.error is not None
        assert second.error["reason"] == "ARTIFACT_EXISTS"
        assert await rt.artifacts.read_bytes(run_id, first.artifact_ids[0]) == b"one"
        # the service: ARTIFACT_IMMUTABLE
        with pytest.raises(Failure) as caught:
            await rt.artifacts.write_bytes(run_id, "a.md", b"three")
        assert caught.value.reason == "ARTIFACT_IMMUTABLE"
        # the store itself: create-only
        store = rt.artifacts.store
        assert isinstance(store, LocalArtifactStore)
        with pytest.raises(Failure) as caught:
            store.put(run_id, "a.md", b"four")
        assert caught.value.reason == "ARTIFACT_EXISTS"
        # versioned writes pick the next free name
        assert store.put(run_id, "a.md", b"five", versioned=True).path == "a-v2.md"
        assert await rt.artifacts.read_bytes(run_id, first.artifact_ids[0]) == b"one"


async def test_declared_inputs_are_registered_and_checksum_verified(project: Project) -> None:
    async with open_runtime(project.root) as rt:
        context_id, run_id = await _ctx(rt)
        made = await rt.call(
            context_id, "files.write", "c1", {"name": "in.md", "text": "12345"}, as_="app"
        )
        artifact_id = made.artifact_ids[0]
        env = await rt.call(context_id, "files.count", "c2", {"source": artifact_id}, as_="app")
        assert env.ok
        assert env.data == {"bytes": 5}
        missing = await rt.call(
            context_id, "files.count", "c3", {"source": "artifact-000000000000"}, as_="app"
        )
        assert missing.status == "rejected"
        assert missing.error is not None
        assert missing.error["reason"] == "ARTIFACT_INPUT_NOT_FOUND"
        invalid = await rt.call(context_id, "files.count", "c4", {"source": "../x"}, as_="app")
        assert invalid.error is not None
        assert invalid.error["reason"] == "ARTIFACT_INPUT_INVALID"
        # an artifact of another run is not found in this one
        other_ctx, _ = await _ctx(rt)
        foreign = await rt.call(other_ctx, "files.count", "c5", {"source": artifact_id}, as_="app")
        assert foreign.error is not None
        assert foreign.error["reason"] == "ARTIFACT_INPUT_NOT_FOUND"
        # tamper with the file (as root might): the next call is refused before dispatch
        path = _run_dir(project, run_id) / "in.md"
        path.chmod(0o644)
        path.write_bytes(b"54321")
        tampered = await rt.call(
            context_id, "files.count", "c6", {"source": artifact_id}, as_="app"
        )
        assert tampered.status == "rejected"
        assert tampered.error is not None
        assert tampered.error["reason"] == "ARTIFACT_INPUT_INTEGRITY"
        with pytest.raises(Failure):  # refused before the reservation: no call recorded
            await rt.get_call(context_id, "c6", as_="app")
