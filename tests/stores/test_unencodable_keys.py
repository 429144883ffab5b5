"""A caller's id that no store can hold — a lone surrogate, or a NUL on PostgreSQL — is
``INVALID_IDENTIFIER`` on every read, on both SQL backends: it used to escape as a raw
``UnicodeEncodeError`` (``get_call``, ``get_approval``, ``resolve_context(run_id=…)``), an
``INTERNAL_ERROR`` call envelope with a logged traceback, or a PostgreSQL store error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from charter.errors import Failure
from charter.runtime import Runtime, open_runtime
from tests.server._harness import write_served_project

pytestmark = pytest.mark.anyio

SURROGATE = "ctx-a\ud800b"
NUL = "ctx-a\x00b"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def rt(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    root = write_served_project(tmp_path / "p").root
    if request.param == "sqlite":
        url = "sqlite:///.charter/charter.db"
    else:
        url = request.getfixturevalue("pg_url")
    async with open_runtime(root, store=url) as runtime:
        yield runtime


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
async def test_an_unencodable_id_is_refused_cleanly(rt: Runtime, bad: str) -> None:
    ctx = await rt.resolve_context("app", "all")
    lookups = [
        rt.get_call(bad, "c1", as_="alice"),
        rt.get_call(ctx.context_id, bad, as_="alice"),
        rt.get_approval(bad, as_="alice"),
        rt.resolve_context("app", "all", run_id=bad),
    ]
    for lookup in lookups:
        with pytest.raises(Failure) as refused:
            await lookup
        # a NUL can be stored by SQLite, so there it is simply not found
        assert refused.value.reason in (
            "INVALID_IDENTIFIER",
            "CALL_NOT_FOUND",
            "CONTEXT_NOT_FOUND",
            "APPROVAL_NOT_FOUND",
            "RUN_NOT_FOUND",
        ), refused.value
        if bad == SURROGATE:
            assert refused.value.reason == "INVALID_IDENTIFIER"
    env = await rt.call(bad, "kv.get", "c1", {"key": "a"}, as_="app")
    assert env.error is not None
    assert env.error["reason"] != "INTERNAL_ERROR", env.error
    # the store still works
    env = await rt.call(ctx.context_id, "kv.get", "c2", {"key": "a"}, as_="app")
    assert env.error is None or env.error["reason"] != "INTERNAL_ERROR", env.error
