"""Free text a person or an agent sends is bounded on every surface, and a caller's name is
echoed cut short: a 3 MB rejection note or ending reason, a 100,000-character objective used
to be recorded whole from Python and the shell (HTTP alone bounded them); an unknown profile,
agent or task was echoed whole in the error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from charter.contracts.text import MAX_OBJECTIVE, MAX_REASON
from charter.errors import ConfigError, InvalidInput, PermissionDenied
from charter.runtime import Runtime, open_runtime
from charter.workflows.entry import inputs_from_options
from tests.server._harness import Project, write_served_project
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

pytestmark = pytest.mark.anyio
HUGE = "r" * 3_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return write_served_project(tmp_path / "p")


async def _pending(rt: Runtime) -> tuple[str, str]:
    ctx = await rt.resolve_context("app", "all")
    env = await rt.call(ctx.context_id, "kv.put", "c1", {"key": "a", "value": "b"}, as_="app")
    assert env.approval is not None, env
    return ctx.run_id, env.approval["id"]


def _refused_too_long(exc: pytest.ExceptionInfo[InvalidInput], reason: str, field: str) -> None:
    assert exc.value.reason == reason
    assert exc.value.details == {
        "field": field,
        "limit": MAX_OBJECTIVE if field == "objective" else MAX_REASON,
    }
    assert len(exc.value.message) < 100


async def test_reasons_and_objectives_are_bounded_from_python(project: Project) -> None:
    async with open_runtime(project.root, store="sqlite:///.charter/charter.db") as rt:
        run_id, approval_id = await _pending(rt)
        before = len(await rt.events(run_id, limit=10_000))
        for decide in (rt.reject, rt.approve):
            with pytest.raises(InvalidInput) as refused:
                await decide(approval_id, as_="alice", reason=HUGE)
            _refused_too_long(refused, "REASON_TOO_LONG", "reason")
        with pytest.raises(InvalidInput) as refused:
            await rt.operations.end_run(run_id, "cancelled", reason=HUGE, as_="alice")
        _refused_too_long(refused, "REASON_TOO_LONG", "reason")
        with pytest.raises(InvalidInput) as refused:
            await rt.resolve_context("app", "all", objective="o" * (MAX_OBJECTIVE + 1))
        _refused_too_long(refused, "OBJECTIVE_TOO_LONG", "objective")
        # nothing was recorded: the approval still waits, the run still runs
        assert len(await rt.events(run_id, limit=10_000)) == before
        assert (await rt.get_approval(approval_id, as_="alice"))["status"] == "pending"
        # at the limit, taken
        await rt.reject(approval_id, as_="alice", reason="r" * MAX_REASON)
        await rt.resolve_context("app", "all", objective="o" * MAX_OBJECTIVE)


async def test_text_and_attachments_of_the_wrong_type_are_invalid_input(project: Project) -> None:
    """A library caller's bytes for a note or objective, or an attachment that is not a
    ``(kind, ref)`` pair of strings: ``InvalidInput`` naming the field, nothing recorded
    (they raised TypeError from a regex, or ValueError unpacking the pair)."""
    async with open_runtime(project.root, store="sqlite:///.charter/charter.db") as rt:
        run_id, approval_id = await _pending(rt)
        before = len(await rt.events(run_id, limit=10_000))
        for objective in (b"fetch it", 5, ["a"]):
            with pytest.raises(InvalidInput) as refused:
                await rt.resolve_context("app", "all", objective=objective)  # type: ignore[arg-type]
            assert (refused.value.reason, refused.value.details) == (
                "TEXT_NOT_STRING",
                {"field": "objective"},
            )
        with pytest.raises(InvalidInput) as refused:
            await rt.reject(approval_id, as_="alice", reason=b"no")  # type: ignore[arg-type]
        assert refused.value.reason == "TEXT_NOT_STRING"
        for attachment in (("docs",), ("docs", "a", "b"), ("docs", 5), "docs:a", None):
            with pytest.raises(InvalidInput) as refused:
                await rt.resolve_context("app", "all", attachments=[attachment])  # type: ignore[list-item]
            assert refused.value.reason == "ATTACHMENT_INVALID"
            assert "attachments[0]" in refused.value.message
        assert len(await rt.events(run_id, limit=10_000)) == before
        assert (await rt.get_approval(approval_id, as_="alice"))["status"] == "pending"


async def test_unknown_names_are_echoed_cut_short(project: Project, tmp_path: Path) -> None:
    long = "x" * 100_000
    async with open_runtime(project.root, store="sqlite:///.charter/charter.db") as rt:
        for kwargs, reason in (({}, "PROFILE_UNKNOWN"), ({"agent": long}, "AGENT_UNKNOWN")):
            profile = long if not kwargs else "all"
            with pytest.raises(InvalidInput) as refused:
                await rt.resolve_context("app", profile, **kwargs)
            assert refused.value.reason == reason
            assert len(refused.value.message) < 200, refused.value.message[:300]
            assert "xxxx" in refused.value.message
        with pytest.raises(ConfigError) as nobody:  # --as on every local command
            rt.principal(long)
        assert len(str(nobody.value)) < 300, str(nobody.value)[:300]
    for bad in (long, f"report={long}"):  # charter runs create --input
        with pytest.raises(InvalidInput) as named:
            inputs_from_options([bad], base=tmp_path)
        assert named.value.reason == "RUN_INPUT_INVALID"
        assert len(named.value.message) < 200, named.value.message[:300]
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        with pytest.raises(InvalidInput) as unknown:
            await rt.workflows.create_run(long, as_="alice")
        assert unknown.value.reason == "WORKFLOW_UNKNOWN"
        assert len(unknown.value.message) < 200, unknown.value.message[:300]
        run_id = await rt.workflows.create_run("quarterly-report", as_="alice")
        for step in (
            rt.workflows.task(run_id, long, as_="alice"),
            rt.workflows.end_task(run_id, long, "cancel", reason="r", as_="alice"),
        ):
            with pytest.raises(PermissionDenied) as missing:
                await step
            assert missing.value.reason == "TASK_NOT_FOUND"
            assert len(missing.value.message) < 200, missing.value.message[:300]


def test_the_shell_refuses_a_long_rejection_note(project: Project) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}

    async def pending() -> tuple[str, str]:
        async with open_runtime(project.root, store="sqlite:///.charter/charter.db") as rt:
            return await _pending(rt)

    _, approval_id = anyio.run(pending)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "charter",
            "approvals",
            "reject",
            approval_id,
            "--as",
            "alice",
            "--reason",
            "r" * (MAX_REASON + 1),
            "--json",
        ],
        cwd=project.root,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "REASON_TOO_LONG" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
