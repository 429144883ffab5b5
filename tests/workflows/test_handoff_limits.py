"""A handoff is bounded before it reaches the ledger: at most ``MAX_BYTES`` of JSON and
``MAX_TEXT`` characters per free-text string, on every surface (Python, HTTP, the shell) —
``HANDOFF_TOO_LARGE`` naming the field, nothing recorded (a 20 MB ``notes`` used to be stored
whole)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.errors import InvalidInput
from charter.runtime import Runtime, open_runtime
from charter.server import create_app
from charter.workflows.control import handoff_template
from charter.workflows.handoff import MAX_BYTES, MAX_TEXT
from tests.server._harness import ThreadServer
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

pytestmark = pytest.mark.anyio

OVERSIZED: list[tuple[str, Any, str]] = [
    ("notes", "n" * (MAX_BYTES + 1), "notes"),
    ("notes", {"deep": ["x" * 1000] * 100}, "notes"),
    ("objective", "o" * (MAX_TEXT + 1), "objective"),
    ("constraints", ["ok", "c" * (MAX_TEXT + 1)], "constraints[1]"),
    ("constraints", ["c" * 1000] * 100, "constraints"),
    ("trace_id", "t" * (MAX_TEXT + 1), "trace_id"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _handoffs(rt: Runtime, run_id: str) -> int:
    return sum(e.type == "handoff_recorded" for e in await rt.events(run_id, limit=10_000))


@pytest.mark.parametrize(("name", "value", "field"), OVERSIZED)
async def test_python_refuses_an_oversized_handoff_naming_the_field(
    tmp_path: Path, name: str, value: Any, field: str
) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        run_id = await rt.workflows.create_run("quarterly-report", as_="alice")
        task = (await rt.workflows.tasks(run_id, as_="alice"))[0]
        template = handoff_template(task, sender_role="coordinator", inputs={})
        h = {**template, name: value}
        with pytest.raises(InvalidInput) as refused:
            await rt.workflows.record_handoff(run_id, "retrieve", h, as_="alice")
        assert refused.value.reason == "HANDOFF_TOO_LARGE"
        assert refused.value.details is not None
        assert refused.value.details["field"] == field
        assert field.split("[")[0] in refused.value.message
        assert len(refused.value.message) < 200  # the value is never echoed
        assert await _handoffs(rt, run_id) == 0
        # at the limit it is taken
        at_limit = {**template, "notes": "n" * MAX_TEXT, "objective": "o" * MAX_TEXT}
        await rt.workflows.record_handoff(run_id, "retrieve", at_limit, as_="alice")
        assert await _handoffs(rt, run_id) == 1


def test_http_and_the_shell_refuse_a_huge_note(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    key = (root / ".charter" / "secrets" / "alice.key").read_text().strip()

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as server:
        alice = httpx2.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        with alice:
            run_id = alice.post("/v1/runs", json={"workflow": "quarterly-report"}).json()["run_id"]
            task = alice.get(f"/v1/runs/{run_id}/tasks").json()[0]
            h = handoff_template(task, sender_role="coordinator", inputs={})
            url = f"/v1/runs/{run_id}/tasks/retrieve/handoff"
            res = alice.post(url, json={**h, "notes": "n" * 500_000})  # under the body limit
            assert res.status_code == 422, res.text
            assert res.json()["reason"] == "HANDOFF_TOO_LARGE"
            assert "notes" in res.json()["detail"]
            assert len(res.text) < 1000
            events = alice.get(f"/v1/runs/{run_id}/events").json()["events"]
            assert not [e for e in events if e["type"] == "handoff_recorded"]

    big = tmp_path / "handoff.json"
    big.write_text(json.dumps({**h, "notes": "n" * 500_000}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "charter",
            "tasks",
            "handoff",
            run_id,
            "retrieve",
            "--file",
            str(big),
            "--as",
            "alice",
            "--json",
        ],
        cwd=root,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "HANDOFF_TOO_LARGE" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stdout + done.stderr) < 2000


async def test_a_long_receiver_role_is_echoed_cut_short(tmp_path: Path) -> None:
    """A wrong receiver_role of 60,000 characters (under the size limit) was quoted whole."""
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        run_id = await rt.workflows.create_run("quarterly-report", as_="alice")
        task = (await rt.workflows.tasks(run_id, as_="alice"))[0]
        h = {**handoff_template(task, sender_role="coordinator", inputs={})}
        h["receiver_role"] = "r" * 60_000
        with pytest.raises(InvalidInput) as refused:
            await rt.workflows.record_handoff(run_id, "retrieve", h, as_="alice")
        assert refused.value.reason == "HANDOFF_WRONG_RECEIVER"
        assert len(refused.value.message) < 200
        assert await _handoffs(rt, run_id) == 0
