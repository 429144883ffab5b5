"""``charter test --live``: the executor entries of context tests against a live ``describe``
(a real executor process on loopback), through the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.executors_http.conftest import REPO, FaultExecutor

CTX_TEST = """\
tests:
  - name: executors-fit
    profile: shopper
    executors:
      - {tool: shop.order, version: 1.0.0, expect: compatible}
      - {tool: shop.order, version: 2.0.0, expect: incompatible}
"""


def charter(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "NO_COLOR": "1", "COLUMNS": "200"}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_live_executor_checks(project: Path, executor: FaultExecutor) -> None:
    (project / "tests").mkdir()
    (project / "tests" / "executors.yaml").write_text(CTX_TEST)
    args = ("test", "--project", str(project), "--json")
    static = charter(*args)
    assert static.returncode == 0, static.stdout + static.stderr
    live = charter(*args, "--live")
    assert live.returncode == 0, live.stdout + live.stderr
    assert json.loads(live.stdout)["live"] is True
    # The executor now serves shop.order at 2.0.0: the static check cannot see it; --live does.
    executor.mode("order_version")
    static = charter(*args)
    assert static.returncode == 0, static.stdout
    live = charter(*args, "--live")
    assert live.returncode == 1, live.stdout + live.stderr
    (result,) = json.loads(live.stdout)["results"]
    assert result["failures"] == [
        "live: the executor for shop.order reports version 2.0.0",
        "live: the executor for shop.order is not ready (VERSION_MISMATCH: the executor "
        "serves version 2.0.0; the Build has 1.0.0)",
    ]
    # An executor that is down fails the live check with the reason.
    executor.mode("ok")
    (project / "charter.deploy.yaml").write_text(
        (project / "charter.deploy.yaml").read_text().replace(executor.url, "http://127.0.0.1:9")
    )
    live = charter(*args, "--live")
    assert live.returncode == 1
    (result,) = json.loads(live.stdout)["results"]
    assert "is not ready (EXECUTOR_UNREACHABLE" in result["failures"][0]
