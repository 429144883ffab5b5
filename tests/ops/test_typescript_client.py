"""The TypeScript client's own tests (``clients/typescript``, Node's test runner) against a
live ``charter serve`` that they start: the generated types against the live OpenAPI
document, an approval round trip and an event stream resumed with ``Last-Event-ID``.

Node and npm come from Debian's packages (``make test`` and ``.ci/run`` install them when
missing); the TypeScript compiler from the npm registry (``npm ci``, pinned by the lock)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"

pytestmark = pytest.mark.slow


def test_the_typescript_client_passes_its_tests_against_a_live_server() -> None:
    npm = shutil.which("npm")
    assert npm is not None, "Node and npm are needed: apt-get install nodejs npm"
    env = {**os.environ, "CHARTER_BIN": str(Path(sys.executable).parent / "charter")}
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    lock = CLIENT / "package-lock.json"
    stamp = CLIENT / "node_modules" / ".package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        installed = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=CLIENT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
    ran = subprocess.run(
        [npm, "test"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=600
    )
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    assert "# fail 0" in ran.stdout
