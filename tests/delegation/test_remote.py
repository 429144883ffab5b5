"""A delegating tool served by a remote executor: it gets its span with the request, and the
calls it makes back through ``charter.client`` carry it (``X-Charter-Parent-Span``), so each
is governed on its own and recorded as its child. Real processes and sockets on loopback."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

import charter
from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.executors_http.conftest import free_port, wait_until_up
from tests.server._harness import ThreadServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _write_project(root: Path, executor_url: str, keys: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    shutil.copy(HERE / "remote_tools.py", root / "tools.py")
    (root / "charter.yaml").write_text(
        "name: remote-team\ntools: {python: [tools.py]}\n"
        "profiles:\n  all:\n    include: [kv.get, team.remote]\n"
    )
    secrets_dir = root / "secrets"
    secrets_dir.mkdir()
    for name in ("fingerprint", "ledger", "credential", "signing"):
        (secrets_dir / name).write_text(keys.get(name) or secrets.token_hex(24))
    digest = hashlib.sha256(keys["app"].encode()).hexdigest()
    binding = (
        f"{{executor: http, url: {executor_url}, credential: {{file: secrets/credential}}, "
        "signing_key: {file: secrets/signing}}"
    )
    (root / "charter.deploy.yaml").write_text(
        f"""\
environment: test
secrets:
  fingerprint_key: {{file: secrets/fingerprint}}
  ledger_key: {{file: secrets/ledger}}
principals:
  app: {{kind: application, tenant: t1, permissions: [kv:read], api_key: {{sha256: {digest}}}}}
egress: {{allow: [127.0.0.1/32]}}
bindings:
  team.remote: {binding}
"""
    )
    return root


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[ThreadServer, Path, str]]:
    keys = {
        "app": secrets.token_urlsafe(24),
        "credential": secrets.token_hex(24),
        "signing": secrets.token_hex(24),
    }
    port = free_port()
    executor_url = f"http://127.0.0.1:{port}"
    project = _write_project(tmp_path / "p", executor_url, keys)

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project, store="sqlite:///.charter/charter.db")

    server = ThreadServer(create_app(opener=opener))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(charter.__file__).parents[1]), str(ROOT)]),
        "DELEG_SERVER": server.url,
        "DELEG_API_KEY": keys["app"],
        "DELEG_JOURNAL": str(tmp_path / "journal.db"),
        "CHARTER_EXECUTOR_CREDENTIAL": keys["credential"],
        "CHARTER_EXECUTOR_SIGNING_KEY": keys["signing"],
    }
    log = (tmp_path / "executor.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.delegation.remote_app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_up(executor_url, proc, path="/describe")
        with server:
            yield server, project, keys["app"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_a_remote_delegating_tools_calls_are_its_children(
    live: tuple[ThreadServer, Path, str],
) -> None:
    server, _project, key = live
    with Client(server.url, key) as client:
        ctx = client.resolve_context("all")
        env = client.call(ctx["context_id"], "team.remote", "r1", {"keys": ["a", "b"]})
        assert env.status.value == "succeeded", env.error
        assert env.data["statuses"] == ["succeeded", "succeeded"]
        span = env.data["span"]
        assert span == env.trace["span_id"]
        parent = client.get_call(ctx["context_id"], "r1")
        assert parent["delegates_execution"] is True
        tree = parent["delegation"]
        assert [(c["call_id"], c["state"]) for c in tree["children"]] == [
            ("r1.0", "succeeded"),
            ("r1.1", "succeeded"),
        ]
        child = client.get_call(ctx["context_id"], "r1.0")
        assert child["parent_span_id"] == span
        assert child["delegation"]["parent"]["call_id"] == "r1"
        # a header naming a span that is not running is refused, not trusted
        forged = httpx2.post(
            f"{server.url}/v1/contexts/{ctx['context_id']}/calls",
            json={"tool": "kv.get", "call_id": "f1", "arguments": {"key": "a"}},
            headers={"Authorization": f"Bearer {key}", "X-Charter-Parent-Span": span},
            timeout=30,
        )
        assert forged.status_code == 403
        assert forged.json()["error"]["reason"] == "DELEGATION_PARENT_UNKNOWN"
