"""A small project of key-value tools, a deployment of four principals, and a kernel over it.

Every tool appends to ``journal.txt`` in the project directory when it runs, so tests count
executions inside the tools themselves, not through the kernel.
"""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from charter.contracts.canonical import Fingerprinter
from charter.executors.python import PythonExecutor
from charter.kernel.authorize import Enablement
from charter.kernel.kernel import Kernel
from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.redaction import Redactor
from charter.kernel.settings import KernelSettings
from charter.ledger.chain import LedgerKey
from charter.project.build import Build, build_project
from charter.stores.memory import MemoryStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock

TOOLS = '''
"""Key-value tools for kernel tests; each run is journaled next to this file."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import charter

JOURNAL = Path(__file__).resolve().parent / "journal.txt"
STORE = Path(__file__).resolve().parent / "kv.json"


def _journal(tool: str, ctx: charter.Context | None = None, **extra: Any) -> None:
    line = {"tool": tool, "pid": os.getpid(), **extra}
    if ctx is not None:
        line["call_id"] = ctx.call_id
        line["idempotency_key"] = ctx.idempotency_key
    fd = os.open(JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _load() -> dict[str, Any]:
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def _save(data: dict[str, Any]) -> None:
    # whole or not at all: a read running beside a write (tools run in threads) never sees
    # a half-written file
    tmp = STORE.with_name(f"{STORE.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, STORE)


@charter.tool("kv.get", permissions=["kv:read"])
def get(key: str, ctx: charter.Context) -> dict[str, Any]:
    """Read a key."""
    _journal("kv.get", ctx)
    return {"key": key, "value": _load().get(key)}


@charter.tool("kv.put", effect="write", permissions=["kv:write"])
def put(key: str, value: str, ctx: charter.Context) -> dict[str, Any]:
    """Write a key."""
    _journal("kv.put", ctx, key=key)
    data = _load()
    data[key] = value
    _save(data)
    return {"key": key, "written": True}


@charter.tool("kv.delete", effect="write", permissions=["kv:write"])
def delete(key: str, value: str, ctx: charter.Context) -> dict[str, Any]:
    """Delete a key (value must match)."""
    _journal("kv.delete", ctx, key=key)
    return {"key": key, "deleted": True}


@charter.tool("kv.slow", permissions=["kv:read"], timeout_s=30)
def slow(seconds: float, ctx: charter.Context) -> dict[str, Any]:
    """Sleep, then answer."""
    _journal("kv.slow", ctx)
    time.sleep(seconds)
    return {"slept": seconds}


@charter.tool("kv.boom", permissions=["kv:read"], idempotent=False)
def boom(message: str) -> None:
    """Raise with the message."""
    raise RuntimeError(message)


@charter.tool("kv.echo", permissions=["kv:read"])
def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Return the payload as the result."""
    return payload


@charter.tool("kv.limited", permissions=["kv:read"], call_limit=2)
def limited(n: int) -> int:
    """A tool that may be called twice per context."""
    return n


@charter.tool("kv.critical", permissions=["kv:read"], danger="critical")
def critical() -> str:
    """A critical tool."""
    return "ok"


@charter.tool("kv.host", permissions=["kv:read"], tenancy="host_scoped")
def host() -> str:
    """A host-level tool."""
    return "ok"


@charter.tool("kv.typed", permissions=["kv:read"],
              result_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                             "required": ["n"]})
def typed(n: Any) -> dict[str, Any]:
    """Returns n, which the result schema wants to be an integer."""
    return {"n": n}


@charter.tool("kv.big", permissions=["kv:read"], max_result_bytes=100)
def big(size: int) -> dict[str, Any]:
    """Returns a result of about size bytes."""
    return {"blob": "x" * size}


@charter.tool("kv.propose", effect="proposal", permissions=["kv:write"])
def propose(key: str) -> dict[str, Any]:
    """Propose a change (not enabled in the test deployment)."""
    return {"key": key}


@charter.tool("kv.of_tenant", permissions=["kv:read"])
def of_tenant(tenant: str, key: str) -> dict[str, Any]:
    """Read a key of a named tenant (the caller's own only)."""
    return {"tenant": tenant, "key": key}


@charter.tool("kv.scoped", permissions=["kv:read"], agent_scopes=["helper"])
def scoped() -> str:
    """Only for the helper agent."""
    return "ok"
'''

CHARTER_YAML = """
name: kvtest
tools: {python: [tools.py]}
profiles:
  all:
    include: [kv.get, kv.put, kv.delete, kv.slow, kv.boom, kv.echo, kv.limited, kv.critical,
              kv.host, kv.typed, kv.big, kv.propose, kv.scoped, kv.of_tenant]
  readers:
    include: [kv.get, kv.echo]
  writers:
    include: [kv.get, kv.put]
agents:
  helper:
    tools: [kv.get, kv.scoped]
  reader_bot:
    tools: [kv.get]
"""

KEY = LedgerKey("test-key", b"k" * 32)
FP = Fingerprinter("fp-test", b"f" * 32)


def principal(name: str, tenant: str, kind: str, *perms: str) -> Principal:
    return Principal(
        name=name, tenant=tenant, kind=PrincipalKind(kind), permissions=frozenset(perms)
    )


ALICE = principal("alice", "acme", "operator", "kv:read", "kv:write", "approvals:approve")
BOB = principal("bob", "acme", "operator", "kv:read")
APP = principal("app", "acme", "application", "kv:read", "kv:write", "approvals:approve")
INTRUDER = principal("intruder", "globex", "application", "kv:read", "kv:write")


@dataclass
class Env:
    project: Path
    build: Build
    kernel: Kernel
    clock: FakeClock
    store: Any

    def journal(self) -> list[dict[str, Any]]:
        import json

        path = self.project / "journal.txt"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def runs_of(self, tool: str) -> int:
        return sum(1 for line in self.journal() if line["tool"] == tool)


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    (root / "tools.py").write_text(textwrap.dedent(TOOLS))
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "kv")


def make_kernel(
    project: Path,
    store: Any,
    clock: FakeClock,
    *,
    settings: KernelSettings | None = None,
    **kw: Any,
) -> Kernel:
    build = build_project(project)
    redactor = Redactor()
    executor = PythonExecutor(
        redact_message=redactor.message_redactor(),
        root=project,
        entrypoints={t: b.entrypoint for t, b in build.tools.items() if b.entrypoint},
    )
    return Kernel(
        build=build,
        store=store,
        fingerprinter=FP,
        executors={"python": executor},
        bindings={},
        settings=settings
        or KernelSettings(
            enablement=Enablement(enabled=frozenset({"kv.put", "kv.delete"})),
            read_retry_backoff_s=0.0,
        ),
        redactor=redactor,
        clock=clock,
        **kw,
    )


KernelFactory = Callable[..., Kernel]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest, project: Path, tmp_path: Path) -> AsyncIterator[Env]:
    clock = FakeClock(step=timedelta(0))
    if request.param == "memory":
        store: Any = MemoryStore(key=KEY, clock=clock)
        kernel = make_kernel(project, store, clock)
        yield Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)
    else:
        async with SQLiteStore.open(tmp_path / "charter.db", key=KEY, clock=clock) as store:
            kernel = make_kernel(project, store, clock)
            yield Env(project=project, build=kernel.build, kernel=kernel, clock=clock, store=store)


__all__ = ["ALICE", "APP", "BOB", "INTRUDER", "MappingProxyType"]
