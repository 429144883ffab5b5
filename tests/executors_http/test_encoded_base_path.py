"""charter.executor.v1 signs the request path as sent. An executor app mounted under a base
path with a character that is percent-encoded on the wire (``/exec%20v1``) verified the
decoded path (``/exec v1/describe``), so every signed request was refused 401
``SIGNATURE_INVALID`` although client and executor shared the right keys."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import charter.remote
from charter.executors.http_protocol import signed_headers
from tests.executors_http import fault_tools

CREDENTIAL, SIGNING_KEY = "c" * 32, "s" * 32


@pytest.mark.parametrize("base", ["/exec%20v1", "/tools/v1", "/caf%C3%A9"])
def test_a_signed_describe_under_an_encoded_base_path_is_accepted(
    tmp_path: Path, base: str
) -> None:
    executor = charter.remote.app(
        [fault_tools.order],
        name="mounted",
        version="1",
        credential=CREDENTIAL,
        signing_key=SIGNING_KEY,
        journal=tmp_path / "journal.db",
    )
    outer = Starlette(routes=[Mount(httpx2.URL(f"http://x{base}").path, app=executor)])

    async def describe(path: str, key: str) -> httpx2.Response:
        headers = signed_headers(
            credential=CREDENTIAL.encode(),
            signing_key=key.encode(),
            method="GET",
            path=path,
            body=b"",
            now=time.time(),
        )
        transport = httpx2.ASGITransport(app=outer)
        async with httpx2.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.get(f"{base}/describe", headers=headers)

    answer = anyio.run(describe, f"{base}/describe", SIGNING_KEY)
    assert answer.status_code == 200, answer.text
    assert [t["id"] for t in answer.json()["tools"]] == ["shop.order"]
    wrong = anyio.run(describe, f"{base}/describe", "w" * 32)  # still checked
    assert wrong.status_code == 401
    assert wrong.json()["error"]["reason"] == "SIGNATURE_INVALID"
