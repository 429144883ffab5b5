"""``charter mcp`` over stdio, driven by the official MCP SDK client in a real subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.mcp import _flow
from tests.mcp._project import make_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def server(project: Path, principal: str, profile: str = "main") -> StdioServerParameters:
    return StdioServerParameters(
        command=_flow.CHARTER,
        args=["mcp", "--profile", profile, "--as", principal, "--project", str(project)],
        cwd=project,
    )


async def test_stdio_acceptance(tmp_path: Path) -> None:
    make_project(tmp_path)
    async with (
        Client(server(tmp_path, "app"), cache=None) as main,
        Client(server(tmp_path, "viewer"), cache=None) as viewer,
    ):
        await _flow.check_listing(main, viewer)
        await _flow.check_read_and_ledger(main, tmp_path)
        await _flow.check_invalid(main)
        await _flow.check_approval_and_retry(main, tmp_path, "store-1")
        await _flow.check_read_key_dedup(main, tmp_path, "echo-1")


async def test_unknown_profile_fails_before_serving(tmp_path: Path) -> None:
    make_project(tmp_path)
    import anyio

    done = await anyio.run_process(
        [_flow.CHARTER, "mcp", "--profile", "nope", "--as", "app", "--project", str(tmp_path)],
        check=False,
    )
    assert done.returncode != 0
    assert b"unknown profile 'nope'" in done.stderr
    assert b"main" in done.stderr  # the known profiles are named
