"""The CLI's --server mode: the same commands over the HTTP API, the API key decides who."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from charter.client import AsyncClient, Client
from charter.errors import InvalidInput
from tests.server._harness import Project, ThreadServer


def charter(
    args: list[str], key: str, server: ThreadServer, cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHARTER_API_KEY": key, "CHARTER_SERVER": server.url, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )


def test_call_approve_and_resubmit_over_the_api(
    project: Project, server: ThreadServer, tmp_path: Path
) -> None:
    app, alice = project.keys["app"], project.keys["alice"]
    ctx = json.loads(
        charter(["contexts", "resolve", "--profile", "all", "--json"], app, server, tmp_path).stdout
    )
    args = [
        "call",
        "kv.put",
        "--context",
        ctx["context_id"],
        "--call-id",
        "r1",
        "--args",
        '{"key": "k", "value": "v"}',
        "--json",
    ]
    pending = charter(args, app, server, tmp_path)
    assert pending.returncode == 3, pending.stderr
    approval = json.loads(pending.stdout)["approval"]["id"]
    refused = charter(["approvals", "approve", approval], app, server, tmp_path)
    assert refused.returncode == 1
    assert "APPROVER_NOT_HUMAN" in refused.stderr
    listed = json.loads(
        charter(
            ["approvals", "ls", "--status", "pending", "--json"], alice, server, tmp_path
        ).stdout
    )
    assert approval in {a["approval_id"] for a in listed}
    assert (
        charter(
            ["approvals", "approve", approval, "--reason", "ok"], alice, server, tmp_path
        ).returncode
        == 0
    )
    done = charter(args, app, server, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    shown = json.loads(
        charter(
            ["calls", "show", "r1", "--context", ctx["context_id"], "--json"], app, server, tmp_path
        ).stdout
    )
    assert shown["state"] == "succeeded"
    by_id = charter(["calls", "show", "r1", "--json"], app, server, tmp_path)
    assert by_id.returncode == 0, by_id.stdout + by_id.stderr
    assert json.loads(by_id.stdout) == shown  # GET /v1/calls/{call_id}


def test_missing_api_key_is_a_clear_error(server: ThreadServer, tmp_path: Path) -> None:
    out = charter(["approvals", "ls"], "", server, tmp_path)
    assert out.returncode == 1
    assert "CHARTER_API_KEY" in out.stderr


@pytest.mark.parametrize(
    "key",
    ["ключ-секрет", "abc\ndef-secret", "abc def-secret", "tab\tsecret", "bell\x07secret"],
)
def test_an_api_key_that_cannot_be_a_header_is_invalid_input_not_echoed(
    server: ThreadServer, tmp_path: Path, key: str
) -> None:
    """Was internal (UnicodeEncodeError) or transient_external (LocalProtocolError): a script
    would retry a key that can never work."""
    args = ["call", "notes.search", "--profile", "reader", "--call-id", "s1", "--json"]
    done = charter(args, key, server, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    body = json.loads(done.stdout)
    assert body["code"] == "invalid_input"
    assert body["reason"] == "API_KEY_INVALID"
    assert "CHARTER_API_KEY" in body["error"]
    assert "secret" not in done.stdout + done.stderr
    plain = charter(args[:-1], key, server, tmp_path)
    assert plain.returncode == 1
    assert "CHARTER_API_KEY" in plain.stderr
    assert "secret" not in plain.stdout + plain.stderr


@pytest.mark.parametrize("url", ["notaurl", "ftp://127.0.0.1:8750", "http://", "http://[::1"])
def test_a_server_that_is_not_an_http_url_is_invalid_input_naming_the_option(
    project: Project, tmp_path: Path, url: str
) -> None:
    env = {**os.environ, "CHARTER_API_KEY": project.keys["app"], "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "charter", "call", "kv.get", "--call-id", "s1", "--profile", "all",
         "--server", url,
         "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["code"] == "invalid_input"  # not transient_external: retrying cannot help
    assert body["reason"] == "SERVER_URL_INVALID"
    assert "--server" in body["error"]
    assert "http://" in body["error"]


def test_the_python_client_refuses_the_same_key_and_url() -> None:
    with pytest.raises(InvalidInput) as bad_key:
        Client("http://127.0.0.1:8750", api_key="ключ")
    assert bad_key.value.reason == "API_KEY_INVALID"
    assert "ключ" not in str(bad_key.value)
    with pytest.raises(InvalidInput) as bad_url:
        AsyncClient("notaurl", api_key="k")
    assert bad_url.value.reason == "SERVER_URL_INVALID"
