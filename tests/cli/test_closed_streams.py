"""The real ``charter`` executable started with a standard stream closed (``<&-``, ``>&-``).

Python leaves ``sys.stdin`` / ``sys.stdout`` as ``None`` then: ``--args -`` answered "internal
error (AttributeError)", ``charter mcp`` did too, and with stdout closed every command that
printed — and the error reporter itself — ended in a traceback. Now a closed stream reads or
writes the null device, and what needs one says so in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_first_hour import CHARTER
from tests.conftest import copy_demo


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)


def closing(fd: int, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``charter ARGS`` with descriptor ``fd`` closed in the child before it starts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [CHARTER, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        preexec_fn=lambda: os.close(fd),  # the child only closes a descriptor
        timeout=60,
    )


CALL = ("call", "notes.search", "--profile", "reader", "--as", "app", "--call-id", "c1")


def test_args_from_a_closed_stdin_is_one_clear_line(demo: Path) -> None:
    done = closing(0, *CALL, "--args", "-", cwd=demo)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "error: --args -: standard input is closed; pipe the text in, or give it inline"
    )
    as_json = closing(0, *CALL, "--args", "-", "--json", cwd=demo)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["reason"] == "STDIN_CLOSED"


def test_mcp_with_a_closed_stdin_ends_as_at_end_of_input(demo: Path) -> None:
    done = closing(0, "mcp", "--profile", "reader", "--as", "app", cwd=demo)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "internal error" not in done.stderr


def test_mcp_with_a_closed_stdout_refuses_to_serve(demo: Path) -> None:
    done = closing(1, "mcp", "--profile", "reader", "--as", "app", cwd=demo)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: standard output is closed: the stdio transport answers the client there"
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [(("runs", "ls"), 0), (("runs", "show", "nope"), 1), (("runs", "show", "nope", "--json"), 1)],
)
def test_a_closed_stdout_is_never_a_traceback(
    demo: Path, args: tuple[str, ...], status: int
) -> None:
    done = closing(1, *args, cwd=demo)
    assert "Traceback" not in done.stderr
    assert done.returncode == status, done.stderr
