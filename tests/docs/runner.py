"""Run one page's examples in order, in the current directory (a fresh temporary one).

Invoked by test_examples.py as ``python runner.py STEPS.json`` with the checkout's ``src`` on
PYTHONPATH and a ``charter`` command on PATH. Python blocks share one namespace (a later block
may use what an earlier one defined) and may use top-level ``await``; every block starts in
the page's directory. Prints ``ran LOCATION`` per block; on the first failure prints what went
wrong and exits 1. A tool an example declares with ``@charter.tool`` must also give a valid
contract, as ``charter build`` would require.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

TIMEOUT_S = 90


_SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}


def shell(code: str, groups: list[int], *, keep_env: bool = False) -> tuple[int, str]:
    """Run ``code`` in bash (-e, pipefail) in its own process group; with ``keep_env`` the
    variables it exports become this process's (so later blocks see them)."""
    env_file = Path.cwd() / ".docs-test-env"
    if keep_env:
        code = f'{code}\nenv -0 > "{env_file}"\n'
    proc = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    groups.append(proc.pid)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, f"{out}\n(timed out after {TIMEOUT_S} s)"
    if keep_env and proc.returncode == 0:
        for item in env_file.read_text(encoding="utf-8").split("\0"):
            name, sep, value = item.partition("=")
            if sep and name not in _SHELL_OWN:
                os.environ[name] = value
        env_file.unlink()
    return proc.returncode, out


def python(code: str, where: str, namespace: dict[str, Any]) -> None:
    """Run one block; then every ``@charter.tool`` it defined must give a valid contract,
    as ``charter build`` requires (a tool without a description fails here, not later)."""
    from charter.contracts.decorator import declaration, declared_contract

    before = dict(namespace)
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)
    for name, value in namespace.items():
        if before.get(name) is not value and callable(value) and declaration(value) is not None:
            declared_contract(value)  # raises ContractError naming the problem


def main() -> int:
    steps = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    home = Path.cwd()
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    groups: list[int] = []
    try:
        for step in steps:
            os.chdir(home)
            where = step["where"]
            for command in step["setup"]:
                rc, out = shell(command, groups, keep_env=True)
                if rc != 0:
                    print(f"FAILED setup of {where}: {command}\n{out}")
                    return 1
            if step["lang"] == "sh":
                rc, out = shell(step["code"], groups)
                if rc != 0:
                    print(f"FAILED {where} (exit {rc}):\n{step['code']}--- output ---\n{out}")
                    return 1
            else:
                try:
                    python(step["code"], where, namespace)
                except BaseException:  # report whatever the example raised, SystemExit included
                    print(f"FAILED {where}:\n{step['code']}--- traceback ---")
                    traceback.print_exc(file=sys.stdout)
                    return 1
            print(f"ran {where}", flush=True)
        return 0
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
