"""A rejection never sends back the call's own secret argument value.

An intake rejection names where the arguments went wrong by JSON pointer, made of the keys
the caller chose; a caller that also used its secret (``config.api_key``) as a key — an
unknown property, a repeated key — must not get it back in the error, as a Python value or as
JSON text (every surface answers through the same kernel).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from tests.privacy._project import PrivacyProject
from tests.privacy.test_canary_project import found

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_rejection_naming_a_key_scrubs_the_calls_secret(
    tmp_path: Path, project: PrivacyProject
) -> None:
    c = project.canaries
    config = {"api_key": c.arg}
    sent: dict[str, object] = {
        "unknown property (value)": {"url": "u", "config": config, c.arg: 1},
        "unknown property (text)": json.dumps({"url": "u", "config": config, c.arg: 1}),
        "repeated key (text)": (
            f'{{"url": "u", "config": {{"api_key": "{c.arg}"}}, "{c.arg}": 1, "{c.arg}": 2}}'
        ),
    }
    expected = {
        "unknown property (value)": "ARGS_SCHEMA_MISMATCH",
        "unknown property (text)": "ARGS_SCHEMA_MISMATCH",
        "repeated key (text)": "ARGS_DUPLICATE_KEY",
    }
    async with open_runtime(project.root, store=f"sqlite:///{tmp_path / 'c.db'}") as rt:
        ctx = await rt.resolve_context("app", "all")
        for index, (what, arguments) in enumerate(sent.items()):
            out = await rt.call(ctx.context_id, "svc.fetch", f"r{index}", arguments, as_="app")
            assert out.status is CallStatus.REJECTED, what
            assert out.error is not None
            assert out.error["reason"] == expected[what], (what, out.error)
            assert "[REDACTED]" in out.error["message"], (what, out.error)
            assert not found(c.arg, json.dumps(out.to_dict()).encode()), (what, out.error)
        # a rejection naming an innocent key still names it
        plain = await rt.call(
            ctx.context_id, "svc.fetch", "r9", {"url": "u", "config": config, "extra": 1}, as_="app"
        )
        assert plain.error is not None
        assert "/extra" in plain.error["message"]
