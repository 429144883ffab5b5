"""A real executor process the tests control (uvicorn on a free loopback port), and a project
whose deployment binds its tools to it over ``executor: http``."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

import charter
from charter.kernel.envelope import Envelope
from charter.remote import Journal
from charter.runtime import Runtime

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class FaultExecutor:
    url: str
    credential: str
    signing_key: str
    journal: Path
    process: subprocess.Popen[bytes]

    def mode(self, mode: str) -> None:
        response = httpx2.post(f"{self.url}/_control", json={"mode": mode}, timeout=5)
        response.raise_for_status()

    def effects(self) -> int:
        return int(httpx2.get(f"{self.url}/_control", timeout=5).json()["effects"])

    def held(self) -> int:
        """How many answers the ``late`` mode is holding back."""
        return int(httpx2.get(f"{self.url}/_control", timeout=5).json()["held"])

    def release(self) -> None:
        """Let the answers the ``late`` mode holds go out."""
        httpx2.post(f"{self.url}/_control", json={"release": True}, timeout=5).raise_for_status()

    @property
    def log(self) -> Path:
        """The executor process's own log (uvicorn's and the app's errors)."""
        return self.journal.parent / "executor.log"

    def executions(self, tool_id: str = "shop.order") -> int:
        """How many calls of ``tool_id`` the executor's own journal records."""
        journal = Journal(self.journal)
        try:
            return journal.count(tool_id=tool_id)
        finally:
            journal.close()


def wait_until_up(url: str, process: subprocess.Popen[bytes], path: str = "/_control") -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the executor process exited with {process.returncode}")
        try:
            httpx2.get(url + path, timeout=1)
            return
        except httpx2.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("the executor did not come up within 30 s")


@contextlib.contextmanager
def running_executor(directory: Path, **env_extra: str) -> Iterator[FaultExecutor]:
    """The scripted executor (``fault_app``) as a uvicorn process on a free loopback port,
    its business table, journal and log in ``directory``; ``env_extra`` reaches the app's
    environment (``FAULT_BODY_TIMEOUT_S``)."""
    port = free_port()
    credential, signing_key = secrets.token_hex(24), secrets.token_hex(24)
    env = {
        **os.environ,
        "FAULT_DB": str(directory / "business.db"),
        "FAULT_JOURNAL": str(directory / "journal.db"),
        "CHARTER_EXECUTOR_CREDENTIAL": credential,
        "CHARTER_EXECUTOR_SIGNING_KEY": signing_key,
        **env_extra,
    }
    log = (directory / "executor.log").open("wb")  # its shutdown logs a cancelled hang
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.executors_http.fault_app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "1",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        yield FaultExecutor(
            url=url,
            credential=credential,
            signing_key=signing_key,
            journal=directory / "journal.db",
            process=process,
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="session")
def fault_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultExecutor]:
    with running_executor(tmp_path_factory.mktemp("fault-executor")) as executor:
        yield executor


@pytest.fixture
def executor(fault_executor: FaultExecutor) -> Iterator[FaultExecutor]:
    fault_executor.mode("ok")
    yield fault_executor
    fault_executor.mode("ok")


CHARTER_YAML = """\
name: shop
version: 1.0.0
description: fault tests
tools:
  python: [tools.py]
profiles:
  shopper:
    description: everything
    include: [shop.lookup, shop.order]
"""


def write_project(
    directory: Path,
    url: str,
    credential: str,
    signing_key: str,
    *,
    lookup_required: bool = True,
    extra_binding: str = "",
    extra_top: str = "",
    tools: str = "fault_tools.py",
    egress: str = "egress: {allow: [127.0.0.1/32]}\n",
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / tools, directory / "tools.py")
    (directory / "charter.yaml").write_text(CHARTER_YAML)
    secrets_dir = directory / "secrets"
    secrets_dir.mkdir(exist_ok=True)
    for name, value in {
        "fingerprint": secrets.token_hex(24),
        "ledger": secrets.token_hex(24),
        "app": secrets.token_hex(24),
        "op": secrets.token_hex(24),
        "credential": credential,
        "signing": signing_key,
    }.items():
        (secrets_dir / name).write_text(value + "\n")
    binding = (
        "{executor: http, url: URL, credential: {file: secrets/credential}, "
        "signing_key: {file: secrets/signing}, max_response_bytes: 65536"
    ).replace("URL", url)
    (directory / "charter.deploy.yaml").write_text(
        f"""\
environment: test
secrets:
  fingerprint_key: {{file: secrets/fingerprint}}
  ledger_key: {{file: secrets/ledger}}
principals:
  app: {{kind: application, tenant: t1, permissions: [shop:use], api_key: {{file: secrets/app}}}}
  op:
    kind: operator
    tenant: t1
    permissions: [approvals:approve]
    api_key: {{file: secrets/op}}
enable: [shop.order]
{egress}bindings:
  shop.lookup: {binding}, required: {str(lookup_required).lower()}{extra_binding}}}
  shop.order: {binding}}}
{extra_top}"""
    )
    return directory


@pytest.fixture
def project(tmp_path: Path, executor: FaultExecutor) -> Path:
    return write_project(tmp_path / "shop", executor.url, executor.credential, executor.signing_key)


@pytest.fixture
async def rt(project: Path) -> AsyncIterator[Runtime]:
    async with charter.open(
        project, store="memory:", audit_file=project / "audit.jsonl"
    ) as runtime:
        yield runtime


def audit_lines(project: Path, call_id: str) -> list[dict[str, Any]]:
    """The audit file's records about ``call_id``."""
    path = project / "audit.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("call_id") == call_id]


async def approved_call(
    rt: Runtime, context_id: str, tool: str, call_id: str, arguments: dict[str, Any]
) -> Envelope:
    """Call, approve as the operator, re-submit: the governed write path."""
    first = await rt.call(context_id, tool, call_id, arguments, as_="app")
    assert first.status.value == "pending_approval", first
    assert first.approval is not None
    await rt.approve(first.approval["id"], as_="op")
    return await rt.call(context_id, tool, call_id, arguments, as_="app")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
