"""An artifact name that holds a known secret is refused (``ARTIFACT_NAME_SECRET``) before it
reaches the disk, the index, an event or the database — from a tool, an upload over HTTP and
the CLI — and the refusal never repeats the name."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from charter.client import Client
from charter.errors import Failure
from charter.runtime import open_runtime
from tests.server._harness import Project, ThreadServer

pytestmark = pytest.mark.anyio
CHARTER = Path(sys.executable).with_name("charter")


def _files_under(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*")]


async def test_a_tool_naming_a_file_after_a_secret_argument_is_refused(project: Project) -> None:
    async with open_runtime(project.root) as rt:
        ctx = await rt.resolve_context("app", "all")
        # a credential of the deployment (the approval token), base64-encoded in the name
        key_b64 = base64.urlsafe_b64encode(project.approval_token.encode()).decode()
        out = await rt.call(
            ctx.context_id,
            "files.write",
            "c1",
            {"name": f"reports/{key_b64}.md", "text": "x"},
            as_="app",
        )
        assert out.status.value == "failed"
        assert out.error is not None
        assert out.error["reason"] == "ARTIFACT_NAME_SECRET"
        assert key_b64 not in json.dumps(out.to_dict())
        rows = await rt.store.read_stored(ctx.run_id, after=0)
        assert key_b64 not in b"".join(r.data for r in rows).decode()
        assert out.artifact_ids == ()
    run_dir = project.root / ".charter" / "artifacts"
    assert not any(key_b64 in p for p in _files_under(run_dir))


def test_an_upload_named_after_a_secret_is_refused_over_http(
    served: Project, server: ThreadServer, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    run_id = str(app.resolve_context("all")["run_id"])
    name = f"dump-{served.approval_token}.txt"
    with pytest.raises(Failure) as caught:
        app.upload_artifact(run_id, b"data", name=name)
    assert caught.value.reason == "ARTIFACT_NAME_SECRET"
    assert served.approval_token not in str(caught.value)
    assert app.list_artifacts(run_id) == []
    assert not any(served.approval_token in p for p in _files_under(served.root / ".charter"))


async def test_the_cli_refuses_a_secret_name(project: Project, tmp_path: Path) -> None:
    source = tmp_path / "payload.txt"
    source.write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    async with open_runtime(project.root) as rt:
        run_id = (await rt.resolve_context("app", "all")).run_id
    name = f"k-{project.approval_token}.txt"
    proc = subprocess.run(
        [
            str(CHARTER),
            "artifacts",
            "put",
            run_id,
            str(source),
            "--name",
            name,
            "--project",
            str(project.root),
            "--as",
            "app",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode != 0
    assert "ARTIFACT_NAME_SECRET" in proc.stdout + proc.stderr
    assert project.approval_token not in proc.stdout + proc.stderr
    assert not any(project.approval_token in p for p in _files_under(project.root / ".charter"))
