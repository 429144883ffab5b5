"""``charter serve`` refused at start-up, through the real executable: one ``error:`` line and
exit 1, as every other command — never uvicorn's traceback of the failed lifespan, nor its
exit 3 — and never a store URL's password (tests/stores/test_postgres_connect.py has the
store's side)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_first_hour import CHARTER
from tests.conftest import copy_demo

SECRET = "SECRETPW123"


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote


def serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [CHARTER, "serve", "--port", "0", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], why: str) -> list[str]:
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Traceback" not in out, out
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    assert why in errors[0], out
    return errors


def test_a_missing_project_is_one_line_before_anything_listens(tmp_path: Path) -> None:
    done = serve("--project", str(tmp_path / "nonexistent"), cwd=tmp_path)
    refused(done, "there is no such directory or Build file")  # the path cut short
    assert "uvicorn" not in done.stderr


def test_a_store_that_is_not_a_database_is_one_line(demo: Path) -> None:
    garbage = demo / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 32)
    done = serve("--store", f"sqlite:///{garbage}", cwd=demo)
    refused(done, "file is not a database")


def test_a_deployment_the_runtime_refuses_is_one_line(demo: Path) -> None:
    (demo / "charter.deploy.prod.yaml").write_text("environment: dev\n")
    done = serve("--env", "prod", cwd=demo)
    refused(done, "the deployment names no fingerprint key")


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"postgresql://bob:{SECRET}@[::1", "postgresql://bob:***@[::1 is not valid"),
        (f"postgresql://u:{SECRET}@127.0.0.1:1/x", "Connection refused"),
        (
            f"postgresql://nobody_here:{SECRET}@127.0.0.1:5432/postgres",
            'role "nobody_here" does not exist',
        ),
    ],
)
def test_a_postgres_store_that_cannot_open_never_shows_its_password(
    demo: Path, url: str, why: str
) -> None:
    done = serve("--store", url, cwd=demo)
    refused(done, why)
    assert SECRET not in done.stdout + done.stderr
