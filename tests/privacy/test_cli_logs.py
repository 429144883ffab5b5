"""What a command logs is scrubbed like what ``charter serve`` logs.

Every command but ``serve`` and ``mcp`` leaves logging unconfigured, so a warning (the chat
orchestrator's ``provider error …``, a library's) is printed by logging's last-resort handler
on stderr. A provider that answers 401 quoting the API key it was sent (an OpenAI-compatible
proxy does) had that key — a secret the deployment references (``chat.api_key_env``) —
printed in clear by ``charter chat``. Real CLI subprocess, a provider on loopback.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.privacy._project import Canaries, write_privacy_project

CHARTER = Path(sys.executable).with_name("charter")
KEY = "sk-proxy-0123456789abcdef-KEY"


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        sent = self.headers.get("Authorization", "").split()[-1]
        message = f"invalid key {sent} (via http://relay:relay-pw-1234@proxy:8080/v1)"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_charter_chat_prints_a_providers_error_without_the_key(
    tmp_path: Path, provider: str
) -> None:
    project = write_privacy_project(tmp_path / "privacy", Canaries.fresh())
    deploy_file = project.root / "charter.deploy.yaml"
    deploy = json.loads(deploy_file.read_text())
    deploy["chat"] = {
        "provider": "openai",
        "model": "m",
        "base_url": provider,
        "api_key_env": "PRIVACY_CHAT_KEY",
        "profile": "all",
    }
    deploy_file.write_text(json.dumps(deploy))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env, PRIVACY_CHAT_KEY=KEY)
    done = subprocess.run(
        [str(CHARTER), "chat", "--as", "app", "-m", "hello", "--project", str(project.root),
         "--store", f"sqlite:///{tmp_path / 'c.db'}"],
        capture_output=True, env=env, timeout=120, check=False, text=True,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert "PROVIDER_http_401" in out, out
    assert "provider error http_401" in done.stderr, out  # the warning is still printed
    assert KEY not in out, out
    assert "relay-pw-1234" not in out, out
    assert "invalid key [REDACTED] (via http://relay:[REDACTED]@proxy:8080/v1)" in done.stderr
