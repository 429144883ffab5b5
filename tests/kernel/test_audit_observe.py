"""``charter audit observe`` (a real subprocess) and the console's observe view count what
enforce would have denied in scoped observe mode, by tool and reason, over a time range."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from charter.server import create_app
from tests.console._console import signed_in
from tests.kernel.test_deploy_policy import call, project_with
from tests.server._harness import ThreadServer

pytestmark = pytest.mark.anyio
SRC = Path(__file__).resolve().parents[2] / "src"
ALICE_KEY = "alice-console-key-0123456789"


def charter(project: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-m", "charter", *args, "--project", str(project), "--store", store],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=project,
        check=False,
    )


@pytest.fixture
async def observed(tmp_path: Path) -> tuple[Path, str]:
    root = project_with(
        tmp_path,
        """
        policy:
          disable: [kv.echo]
          modes:
            tools: {kv.echo: observe, kv.delete: observe}
          observe_without_approval: [kv.delete]
        """,
    )
    deploy = root / "charter.deploy.yaml"
    digest = hashlib.sha256(ALICE_KEY.encode()).hexdigest()
    deploy.write_text(
        deploy.read_text().replace(
            "  alice:\n    kind: operator\n",
            f"  alice:\n    kind: operator\n    api_key: {{sha256: {digest}}}\n",
        )
    )
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    async with open_runtime(root, store=store) as rt:
        for n in range(2):
            echo = await call(rt, "kv.echo", {"payload": {"n": n}}, cid=f"e{n}")
            assert echo.status is CallStatus.SUCCEEDED
        delete = await call(rt, "kv.delete", {"key": "a", "value": "b"}, cid="d1")
        assert delete.status is CallStatus.SUCCEEDED
        enforced = await call(rt, "kv.get", {"key": "a"}, cid="g1")  # enforce: not counted
        assert enforced.status is CallStatus.SUCCEEDED
    return root, store


async def test_the_cli_counts_what_enforce_would_have_denied(observed: tuple[Path, str]) -> None:
    root, store = observed
    proc = charter(root, store, "audit", "observe", "--as", "alice", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["observed_calls"] == 3
    seen = {(r["tool"], r["phase"], r["reason"]): r["count"] for r in report["would_deny"]}
    assert seen == {
        ("kv.echo", "authorization", "TOOL_DISABLED"): 2,
        ("kv.delete", "authorization", "TOOL_NOT_ENABLED"): 1,
        ("kv.delete", "approval", "APPROVAL_REQUIRED"): 1,
    }
    later = charter(
        root, store, "audit", "observe", "--as", "alice", "--since", "2999-01-01", "--json"
    )
    assert json.loads(later.stdout) == {
        "observed_calls": 0,
        "runs_scanned": 4,
        "runs_refused": [],
        "would_deny": [],
    }
    table = charter(root, store, "audit", "observe", "--as", "alice", "--until", "2999-12-31")
    assert table.returncode == 0, table.stderr
    assert "TOOL_DISABLED" in table.stdout


async def test_the_cli_refuses_a_bad_range_and_applications(observed: tuple[Path, str]) -> None:
    root, store = observed
    bad = charter(root, store, "audit", "observe", "--as", "alice", "--since", "yesterday")
    assert bad.returncode != 0
    assert "since must be an RFC 3339 date" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stderr
    app = charter(root, store, "audit", "observe", "--as", "app", "--json")
    assert app.returncode != 0
    assert "OPERATOR_REQUIRED" in app.stdout + app.stderr


async def test_the_console_observe_view(observed: tuple[Path, str]) -> None:
    root, store = observed

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=store)

    with ThreadServer(create_app(opener=opener)) as live:
        page = signed_in(live.url, ALICE_KEY).get("/console/audit/observe")
        assert page.status_code == 200
        assert page.text.count('data-testid="observe-row"') == 3
        assert "TOOL_DISABLED" in page.text
        bad = signed_in(live.url, ALICE_KEY).get("/console/audit/observe?since=soon")
        assert 'data-testid="observe-error"' in bad.text
