"""Readiness over a real executor: digest drift, unreachable executors, wrong keys, and
``charter check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import charter
from charter.cli.app import app
from charter.errors import TransientExternal
from charter.runtime import check_readiness
from tests.executors_http.conftest import FaultExecutor, free_port, write_project

pytestmark = pytest.mark.anyio


async def test_all_tools_ready(project: Path) -> None:
    report = await check_readiness(project)
    assert report.ready
    states = {t.tool_id: t for t in report.tools}
    assert set(states) == {"shop.lookup", "shop.order"}
    for state in states.values():
        assert state.status == "ready"
        assert state.executor == "http"
        assert state.reported_digest == state.expected_digest
        assert state.reported_version == state.expected_version == "1.0.0"


async def test_a_changed_digest_makes_the_tool_not_ready_and_blocks_resolution(
    project: Path, executor: FaultExecutor
) -> None:
    executor.mode("digest")
    report = await check_readiness(project)
    lookup = report.get("shop.lookup")
    assert lookup is not None
    assert (lookup.ready, lookup.reason) == (False, "DIGEST_MISMATCH")
    assert lookup.reported_digest == "sha256:" + "0" * 64
    order = report.get("shop.order")
    assert order is not None
    assert order.ready
    assert not report.ready
    async with charter.open(project, store="memory:") as rt:
        with pytest.raises(TransientExternal) as raised:
            await rt.resolve_context("app", "shopper")
    assert raised.value.reason == "TOOL_NOT_READY"
    assert raised.value.details["tool"] == "shop.lookup"
    assert "DIGEST_MISMATCH" in str(raised.value)


async def test_an_optional_tool_that_is_not_ready_is_omitted(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    project = write_project(
        tmp_path / "opt",
        executor.url,
        executor.credential,
        executor.signing_key,
        lookup_required=False,
    )
    executor.mode("digest")
    async with charter.open(project, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "shopper")
        assert [t.id for t in ctx.tools] == ["shop.order"]
        env = await rt.call(ctx.context_id, "shop.lookup", "c1", {"item": "pen"}, as_="app")
        assert env.status.value == "denied"
        assert env.error is not None
        assert env.error["reason"] == "TOOL_NOT_DISCLOSED"
        report = await rt.readiness()
        assert not report.get("shop.lookup").ready  # type: ignore[union-attr]
        assert report.ready  # the only not-ready tool is optional


async def test_an_unreachable_executor_is_not_ready(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    project = write_project(tmp_path / "down", url, "c" * 32, "s" * 32)
    report = await check_readiness(project)
    assert {t.reason for t in report.tools} == {"EXECUTOR_UNREACHABLE"}
    assert not report.ready


async def test_wrong_keys_make_the_executor_refuse(tmp_path: Path, executor: FaultExecutor) -> None:
    wrong_signing = write_project(
        tmp_path / "sig", executor.url, executor.credential, "wrong-signing-key-0123456789"
    )
    report = await check_readiness(wrong_signing)
    assert {t.reason for t in report.tools} == {"EXECUTOR_REFUSED"}
    wrong_credential = write_project(
        tmp_path / "cred", executor.url, "wrong-credential-0123456789", executor.signing_key
    )
    report = await check_readiness(wrong_credential)
    assert {t.reason for t in report.tools} == {"EXECUTOR_REFUSED"}


async def test_readiness_is_cached_briefly(project: Path, executor: FaultExecutor) -> None:
    async with charter.open(project, store="memory:") as rt:
        assert (await rt.readiness()).ready
        executor.mode("digest")
        assert (await rt.readiness()).ready  # cached: no new describe
        assert not (await rt.readiness(fresh=True)).ready


def _charter(*args: str, project: Path) -> Result:
    return CliRunner().invoke(app, [*args, "--project", str(project)], env={"COLUMNS": "240"})


def test_charter_check_shows_readiness(project: Path, executor: FaultExecutor) -> None:
    ok = _charter("check", "--json", project=project)
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["ready"] is True
    assert {t["status"] for t in doc["tools"]} == {"ready"}
    executor.mode("digest")
    drifted = _charter("check", "--json", project=project)
    assert drifted.exit_code == 1
    tools = {t["tool"]: t for t in json.loads(drifted.stdout)["tools"]}
    assert tools["shop.lookup"]["status"] == "not_ready"
    assert tools["shop.lookup"]["reason"] == "DIGEST_MISMATCH"
    assert tools["shop.lookup"]["expected"]["digest"] != tools["shop.lookup"]["reported"]["digest"]
    table = _charter("check", project=project)
    assert table.exit_code == 1
    assert "DIGEST_MISMATCH" in table.stdout
    assert "shop.lookup" in table.stdout
