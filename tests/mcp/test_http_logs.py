"""``charter mcp --transport http`` logs JSON lines on stderr, uvicorn's own records too, as
its ``--help`` and docs/mcp.md say. Before, uvicorn's default logging configuration replaced
Charter's handler on uvicorn's logger, so its records — "Invalid HTTP request received.",
the graceful-shutdown notices — came out as plain text between the JSON lines, which a log
pipeline reading JSON lines drops or chokes on (``charter serve`` never did this)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.mcp import _flow
from tests.mcp._project import make_project
from tests.mcp.test_http import free_port, wait_listening

pytestmark = pytest.mark.anyio


async def test_every_log_record_is_a_json_line(tmp_path: Path) -> None:
    make_project(tmp_path)
    port = free_port()
    err = tmp_path / "stderr.txt"
    argv = ["mcp", "--profile", "main", "--transport", "http", "--port", str(port)]
    with err.open("wb") as sink:
        proc = subprocess.Popen(
            [_flow.CHARTER, *argv, "--project", str(tmp_path), "--log-level", "info"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
        try:
            await wait_listening(f"http://127.0.0.1:{port}")
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                raw.sendall(b"GARBAGE \x00\x01 HTTP/9\r\n\r\n")  # uvicorn logs a warning
                assert raw.recv(100).startswith(b"HTTP/1.1 400")
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = err.read_text().splitlines()
    banner, *records = lines
    assert banner.startswith("charter mcp: profile main at http://127.0.0.1:")
    assert records, lines
    for line in records:
        record = json.loads(line)  # not JSON: a plain-text line from uvicorn's own config
        assert isinstance(record, dict)
        assert {"ts", "level", "logger", "msg"} <= set(record), record
    loggers = {json.loads(line)["logger"] for line in records}
    assert "uvicorn.error" in loggers, records  # uvicorn's records come through, as JSON
