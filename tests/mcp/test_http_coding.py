"""``charter mcp --transport http`` refuses a body with a ``Content-Encoding`` other than
``identity`` as ``charter serve``'s ``/mcp`` mount does: ``415 UNSUPPORTED_MEDIA_TYPE``, a
problem document with ``Accept-Encoding: identity``. Before: the compressed bytes were read as
the JSON-RPC message, a misleading ``-32700`` 'the message is not valid UTF-8'."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx2
import pytest

from tests.mcp._project import make_project
from tests.mcp.test_http import charter_http, free_port, wait_listening

pytestmark = pytest.mark.anyio

MESSAGE = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'


async def test_a_coded_body_is_415_before_it_is_read(tmp_path: Path) -> None:
    keys = make_project(tmp_path)
    with charter_http(tmp_path, free_port()) as base:
        await wait_listening(base)
        headers = {
            "Authorization": f"Bearer {keys['app']}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        async with httpx2.AsyncClient(base_url=base, trust_env=False, timeout=30) as http:
            for coding, named in (
                ("gzip", "gzip"),
                ("br", "br"),
                ("identity, deflate", "deflate"),
                ("nonsense-coding-canary", "a coding that is not registered"),
            ):
                answer = await http.post(
                    "/mcp/main",
                    content=gzip.compress(MESSAGE),
                    headers={**headers, "Content-Encoding": coding},
                )
                assert answer.status_code == 415, answer.text
                assert answer.headers["content-type"] == "application/problem+json"
                assert answer.headers["accept-encoding"] == "identity"
                problem = answer.json()
                assert problem["reason"] == "UNSUPPORTED_MEDIA_TYPE"
                assert problem["code"] == "invalid_input"
                assert f"the body is encoded ({named})" in problem["detail"]
                assert "canary" not in answer.text
            plain = await http.post(
                "/mcp/main", content=MESSAGE, headers={**headers, "Content-Encoding": "identity"}
            )
            assert plain.status_code == 200, plain.text
            assert plain.json()["result"]["tools"]
