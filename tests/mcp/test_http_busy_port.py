"""``charter mcp --transport http`` on a port another process holds fails in one line, exit 1,
before the runtime opens — as ``charter serve`` does (the same socket, charter.cli._listen).
Before: it opened the runtime, printed where it served ('charter mcp: profile main at …'),
then uvicorn's '[Errno 98] error while attempting to bind on address …' and exit 3."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from tests.mcp import _flow
from tests.mcp._project import make_project


def test_a_busy_port_fails_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    make_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [_flow.CHARTER, "mcp", "--profile", "main", "--transport", "http",
             "--port", str(port), "--project", str(tmp_path)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: port {port} on 127.0.0.1 is already in use (another charter mcp?); "
        "stop it or choose another port with --port"
    ]
    assert not (tmp_path / ".charter" / "charter.db").exists()  # the runtime never opened
