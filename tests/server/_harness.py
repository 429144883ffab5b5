"""A test project with two tenants, API keys and a JWT secret; live servers on loopback.

Servers run for real: uvicorn on a socket bound to 127.0.0.1 on a free port, either in a
thread of the test process (:class:`ThreadServer`) or as ``charter serve`` subprocesses
(:func:`spawn_serve`) for the replica tests.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import uvicorn
from fastapi import FastAPI

from charter.deploy.http_limits import HeadLimits
from charter.server import head_limited_protocol
from tests.kernel._project import write_runtime_project

CHARTER_YAML = """
name: served
tools: {python: [tools.py]}
profiles:
  all:
    include: [kv.get, kv.put, kv.echo, kv.boom, kv.slow]
  reader:
    include: [kv.get, kv.echo]
"""

PRINCIPALS = {
    "alice": ("operator", "acme", ["kv:read", "kv:write", "approvals:approve"]),
    "app": ("application", "acme", ["kv:read", "kv:write", "approvals:approve"]),
    "bob": ("operator", "globex", ["kv:read", "kv:write", "approvals:approve"]),
    "gapp": ("application", "globex", ["kv:read", "kv:write"]),
}
JWT_AUDIENCE = "charter-test"


@dataclass(frozen=True)
class Project:
    root: Path
    keys: dict[str, str]
    approval_token: str
    jwt_secret: bytes


def write_served_project(root: Path) -> Project:
    write_runtime_project(root)
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    keys = {name: secrets.token_urlsafe(24) for name in PRINCIPALS}
    lines = [
        "environment: test",
        "mode: enforce",
        "secrets:",
        "  fingerprint_key: {file: .charter/secrets/fingerprint.key}",
        "  ledger_key: {file: .charter/secrets/ledger.key}",
        "  approval_token: {file: .charter/secrets/approval.token}",
        "enable: [kv.put]",
        "jwt:",
        "  algorithms: [HS256]",
        "  secret: {file: .charter/secrets/jwt.key}",
        f"  audience: {JWT_AUDIENCE}",
        "principals:",
    ]
    for name, (kind, tenant, perms) in PRINCIPALS.items():
        digest = hashlib.sha256(keys[name].encode()).hexdigest()
        lines += [
            f"  {name}:",
            f"    kind: {kind}",
            f"    tenant: {tenant}",
            f"    permissions: [{', '.join(perms)}]",
            f"    api_key: {{sha256: {digest}}}",
        ]
    (root / "charter.deploy.yaml").write_text("\n".join(lines) + "\n")
    token = secrets.token_urlsafe(24)
    jwt_secret = secrets.token_bytes(32).hex().encode()
    for name, value in (("approval.token", token.encode()), ("jwt.key", jwt_secret)):
        path = root / ".charter" / "secrets" / name
        path.write_bytes(value + b"\n")
        path.chmod(0o600)
    return Project(root=root, keys=keys, approval_token=token, jwt_secret=jwt_secret)


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class ThreadServer:
    """uvicorn serving ``app`` on a free loopback port, in a thread with its own loop."""

    def __init__(self, app: FastAPI) -> None:
        self.sock = free_socket()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            app,
            http=head_limited_protocol(HeadLimits()),  # as charter serve: bounded heads
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()


def stored_bytes(root: Path) -> bytes:
    """Every byte of ``root``'s SQLite database files (``.charter/charter.db*``), read by a
    child process. A ThreadServer shares this process: a file descriptor this process opened
    and closed on those files would drop the server's POSIX locks on them, and the next process
    to open the database would take it for unused and delete its WAL under the live server
    (the next read fails SQLITE_IOERR_SHORT_READ; sqlite.org/howtocorrupt.html section 2.2)."""
    files = sorted(str(p) for p in (root / ".charter").glob("charter.db*") if p.is_file())
    if not files:
        return b""
    return subprocess.run(["cat", *files], capture_output=True, check=True, timeout=60).stdout


def free_port() -> int:
    with free_socket() as sock:
        return int(sock.getsockname()[1])


@contextmanager
def spawn_serve(project: Path, store: str, *, port: int | None = None) -> Iterator[str]:
    """``charter serve`` as a subprocess on a free loopback port; yields its base URL."""
    with spawn_serve_process(project, store, port=port) as (url, _):
        yield url


@contextmanager
def spawn_serve_process(
    project: Path, store: str, *, port: int | None = None, args: Sequence[str] = ()
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`spawn_serve` with more options (``args``), yielding the process too."""
    argv = ["serve", "--project", str(project), "--store", store, "--log-level", "warning"]
    with _spawned(project, [*argv, *args], ("/healthz", 200), port) as spawned:
        yield spawned


@contextmanager
def spawn_mcp_process(
    project: Path, store: str, *, profile: str = "all", port: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``charter mcp --transport http`` serving ``profile`` as a subprocess on a free loopback
    port; yields its base URL (the profile is at ``/mcp/{profile}``) and the process."""
    argv = ["mcp", "--transport", "http", "--profile", profile, "--project", str(project)]
    probe = (f"/mcp/{profile}", 401)  # a GET without a credential: refused, once serving
    with _spawned(project, [*argv, "--store", store], probe, port) as spawned:
        yield spawned


@contextmanager
def _spawned(
    project: Path, argv: Sequence[str], probe: tuple[str, int], port: int | None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``charter ARGV --port PORT`` with its output in ``PROJECT/serve-PORT.log``, once a GET of
    ``probe``'s path answers its status; stopped (SIGTERM, then SIGKILL) on the way out."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    log = open(project / f"serve-{port}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "charter"), *argv, "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"charter {argv[0]} exited: {(project / f'serve-{port}.log').read_text()}"
                )
            try:
                if httpx2.get(f"{url}{probe[0]}", timeout=1).status_code == probe[1]:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"charter {argv[0]} did not start")
            time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
