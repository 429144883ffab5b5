"""A tool of another profile is not disclosed through the MCP ``idempotency_key`` handling.

A tool whose own schema declares ``idempotency_key`` keeps it as an argument. The gateway
used to look that up in the whole Build, so calling another profile's such tool answered
differently from calling a name nothing has (a key of the wrong type was not refused, a
string key was not taken as the call id): the tool's existence and schema showed through.
The official SDK client, connected in-process to Charter's MCP server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from charter.mcp._gateway import Gateway, McpSession
from charter.mcp._server import build_server
from charter.runtime import open_runtime
from tests.mcp._project import make_project

pytestmark = pytest.mark.anyio

HIDDEN = '''

@charter.tool("hidden.keyed", permissions=["svc:read"])
def keyed(idempotency_key: str) -> dict[str, Any]:
    """A tool whose own argument is called idempotency_key."""
    return {"kept": idempotency_key}
'''
PROFILE = """
  hidden:
    description: The tool with its own idempotency_key.
    include: [hidden.keyed]
"""


async def test_another_profiles_tool_answers_as_a_name_nothing_has(tmp_path: Path) -> None:
    make_project(tmp_path, extra_profiles=PROFILE)
    tools = tmp_path / "tools" / "svc.py"
    tools.write_text(tools.read_text() + HIDDEN)
    async with open_runtime(tmp_path) as rt:
        who = rt.principal("app")

        async def identify(_ctx: Any) -> tuple[Any, McpSession]:
            return who, McpSession()

        answers: dict[str, list[Any]] = {}
        async with Client(build_server(Gateway(rt, "main"), identify), cache=None) as client:
            for name in ("hidden_keyed", "hidden.keyed", "no_such_tool"):
                for key in (42, "k-1"):
                    result = await client.call_tool(name, {"idempotency_key": key})
                    assert result.is_error
                    assert result.structured_content is not None
                    error = result.structured_content["error"]
                    call_id = (result.meta or {}).get("charter/call_id")
                    answers.setdefault(name, []).append((error["reason"], call_id))
        assert answers["no_such_tool"] == [
            ("IDEMPOTENCY_KEY_INVALID", None),
            ("TOOL_NOT_DISCLOSED", "k-1"),
        ]
        assert answers["hidden_keyed"] == answers["no_such_tool"], answers
        assert answers["hidden.keyed"] == answers["no_such_tool"], answers

        # served in its own profile, the tool keeps its argument
        async with Client(build_server(Gateway(rt, "hidden"), identify), cache=None) as client:
            kept = await client.call_tool("hidden_keyed", {"idempotency_key": "mine"})
            assert not kept.is_error
            assert kept.structured_content == {"kept": "mine"}
            assert (kept.meta or {}).get("charter/call_id") != "mine"
