"""Shared fixtures for the kernel leaves: deployment, redaction, audit, executors."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from charter.contracts.model import ToolContract
from charter.contracts.tool_context import Context
from charter.kernel.executor_port import ExecutionRequest
from charter.kernel.redaction import Redactor

CANARY = "canary-7f3a9c-do-not-leak"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def contract(tool_id: str = "demo.tool", **extra: Any) -> ToolContract:
    return ToolContract(id=tool_id, description="a test tool", **extra)


def request(
    tool_id: str = "demo.tool",
    arguments: Mapping[str, Any] | None = None,
    *,
    deadline_s: float = 30.0,
    call_id: str = "call-1",
    **contract_extra: Any,
) -> ExecutionRequest:
    return ExecutionRequest(
        contract=contract(tool_id, **contract_extra),
        arguments=dict(arguments or {}),
        context=Context(
            call_id=call_id,
            idempotency_key=f"idem-{call_id}",
            context_id="ctx-1",
            run_id="run-1",
            tool_id=tool_id,
            tenant="acme",
            principal="app",
        ),
        deadline_s=deadline_s,
    )


@pytest.fixture
def redact_message() -> Any:
    return Redactor().message_redactor()


@pytest.fixture
def tool_project(tmp_path: Path) -> Path:
    """A project directory with one Python tool module used by both executors."""
    root = tmp_path / "project"
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "sample.py").write_text(
        textwrap.dedent(
            """
            import asyncio
            import os
            import signal
            import subprocess
            import sys
            import time

            from charter.contracts.tool_context import Context
            from charter.contracts.decorator import tool
            from charter.errors import TransientExternal


            @tool("demo.add")
            def add(a: int, b: int) -> int:
                return a + b


            @tool("demo.whoami")
            def whoami(ctx: Context) -> dict:
                return {"call_id": ctx.call_id, "key": ctx.idempotency_key,
                        "tenant": ctx.tenant, "run_id": ctx.run_id}


            async def async_echo(text: str) -> dict:
                await asyncio.sleep(0)
                return {"echo": text}


            def boom(password: str) -> None:
                raise RuntimeError(f"could not log in with {password}")


            def refuse() -> None:
                raise TransientExternal("back end is down", reason="BACKEND_DOWN", retryable=True)


            def not_json() -> object:
                return {"ids": {1, 2}}


            def chatty() -> str:
                print("noise on stdout")
                os.write(1, b"more noise on fd 1\\n")
                print("stderr line", file=sys.stderr)
                return "ok"


            def suicide(pid_file: str) -> None:
                with open(pid_file, "w") as f:
                    f.write(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)


            def hang(pid_file: str) -> None:
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                with open(pid_file, "w") as f:
                    f.write(f"{os.getpid()} {child.pid}")
                time.sleep(600)
            """
        )
    )
    return root


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
