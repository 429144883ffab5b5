"""Three generations through the real ``charter`` command: a deleted test still blocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.proof.test_promotion import APPROVAL_TEST, EXPORT_WEAKENED, OTHER_TEST, project

SRC = str(Path(__file__).resolve().parents[2] / "src")
DEPLOY = """
environment: prod
principals:
  olga: {kind: operator, tenant: acme}
  bot: {kind: application, tenant: acme}
"""


def charter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1", "COLUMNS": "200"}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def promote(root: Path, *extra: str) -> tuple[int, dict[str, object]]:
    done = charter("promote", "latest", "--env", "prod", "--json", *extra, cwd=root)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_three_generations_and_a_waiver_through_the_cli(tmp_path: Path) -> None:
    root = tmp_path / "p"
    project(root, tests={"a.yaml": APPROVAL_TEST, "b.yaml": OTHER_TEST})
    (root / "charter.deploy.yaml").write_text(textwrap.dedent(DEPLOY))
    assert charter("build", cwd=root).returncode == 0
    code, out = promote(root)
    assert code == 0
    assert out["promoted"] is True
    assert out["generation"] == 1
    # Generation 2: a.yaml deleted, the approval requirement kept: promoted.
    (root / "tests" / "a.yaml").unlink()
    assert charter("build", cwd=root).returncode == 0
    code, out = promote(root)
    assert code == 0, out
    results = out["report"]["results"]  # type: ignore[index]
    assert {(r["name"], r["origin"], r["passed"]) for r in results} == {
        ("wipe-is-not-offered", "own", True),
        ("export-needs-approval", "inherited", True),
    }
    # Generation 3 drops the requirement: refused by the test generation 2 no longer had.
    project(root, export=EXPORT_WEAKENED, tests={"b.yaml": OTHER_TEST})
    assert charter("build", cwd=root).returncode == 0
    code, out = promote(root)
    assert code == 1
    assert out["promoted"] is False
    failed = [r["name"] for r in out["report"]["results"] if not r["passed"]]  # type: ignore[index]
    assert failed == ["export-needs-approval"]
    # The table form names the obligation's origin.
    table = charter("promote", "latest", "--env", "prod", cwd=root)
    assert table.returncode == 1
    assert "export-needs-approval" in table.stdout
    assert "inherited" in table.stdout
    # A waiver needs a reason and an operator; an application cannot waive.
    bad = charter(
        "promote", "latest", "--env", "prod", "--waive", "export-needs-approval", cwd=root
    )
    assert bad.returncode == 1
    assert "--reason" in bad.stderr
    assert "Traceback" not in bad.stderr
    code, out = promote(
        root, "--waive", "export-needs-approval", "--reason", "pre-approved", "--as", "bot"
    )
    assert code == 1
    assert out["reason"] == "WAIVER_NEEDS_OPERATOR"
    code, out = promote(
        root, "--waive", "export-needs-approval", "--reason", "pre-approved", "--as", "olga"
    )
    assert code == 0, out
    assert out["promoted"] is True
    (w,) = out["waivers"]  # type: ignore[misc]
    assert (w["name"], w["by"], w["reason"]) == ("export-needs-approval", "olga", "pre-approved")
    # The attempts are ledger runs that verify.
    runs = charter("runs", "ls", "--json", cwd=root)
    assert runs.returncode == 0, runs.stderr
    listed = json.loads(runs.stdout)
    ids = {r["run_id"] for r in (listed if isinstance(listed, list) else listed["runs"])}
    assert {f"promotion.prod.{n:08d}" for n in range(1, 6)} <= ids
    verify = charter("runs", "verify", "promotion.prod.00000005", "--json", cwd=root)
    assert verify.returncode == 0, verify.stdout
