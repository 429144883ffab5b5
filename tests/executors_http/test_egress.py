"""Pinned, allowed addresses: the egress policy, the deployment's ``egress.allow``, and a
binding whose host name re-resolves (through the resolver seam) while the scripted executor
keeps running on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import charter
from charter.cli.app import app
from charter.deploy.deployment import parse_deployment
from charter.errors import ConfigError
from charter.executors.egress import EgressPolicy
from charter.runtime import check_readiness
from tests.executors_http.conftest import (
    HERE,
    FaultExecutor,
    audit_lines,
    free_port,
    write_project,
)

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------------------------------
# the policy


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "169.254.1.2",
        "fe80::1",
        "fd00:ec2::254",
        "100.100.100.200",
        "168.63.129.16",
        "::ffff:169.254.169.254",
    ],
)
def test_link_local_and_metadata_addresses_are_always_refused(address: str) -> None:
    everything = EgressPolicy.parse(["0.0.0.0/0", "::/0", "169.254.0.0/16", "metadata.internal"])
    assert everything.refusal("metadata.internal", address) is not None
    assert EgressPolicy().refusal("metadata.internal", address) is not None


def test_loopback_only_when_declared() -> None:
    assert EgressPolicy().refusal("localhost", "127.0.0.1") is not None
    assert EgressPolicy().refusal("localhost", "::1") is not None
    assert EgressPolicy().refusal("x", "0.0.0.0") is not None
    one = EgressPolicy.parse(["127.0.0.1"])
    assert one.refusal("localhost", "127.0.0.1") is None
    assert one.refusal("localhost", "127.0.0.2") is not None
    assert EgressPolicy.parse(["localhost"]).refusal("localhost", "127.0.0.1") is not None


def test_an_allowlist_admits_only_its_networks_and_hosts() -> None:
    assert EgressPolicy().refusal("exec.example", "10.1.2.3") is None  # no list: any other
    policy = EgressPolicy.parse(["10.0.0.0/8", "exec.example"])
    assert policy.refusal("a.example", "10.1.2.3") is None
    assert policy.refusal("a.example", "192.0.2.7") is not None
    assert policy.refusal("EXEC.example.", "192.0.2.7") is None  # a declared host name


def test_the_deployment_file_reads_egress_and_readiness_naming_bad_fields() -> None:
    deployment = parse_deployment(
        {"egress": {"allow": ["127.0.0.1/32", "exec.example"]}, "readiness": {"ttl_s": 0}}
    )
    assert deployment.egress.describe() == ["127.0.0.1/32", "exec.example"]
    assert deployment.readiness_ttl_s == 0
    for doc, where in (
        ({"egress": {"allow": ["10.0.0.0/8", "not a host!"]}}, "egress.allow: [1]"),
        ({"egress": {"allow": "10.0.0.0/8"}}, "egress.allow"),
        ({"egress": {"deny": []}}, "egress.deny"),
        ({"readiness": {"ttl_s": -1}}, "readiness.ttl_s"),
    ):
        with pytest.raises(ConfigError) as raised:
            parse_deployment(doc, file="d.yaml")
        assert f"d.yaml: {where}" in str(raised.value)


# ---------------------------------------------------------------------------------------
# a binding by host name, pinned


class Resolver:
    """The resolver seam: maps the executor's name to whatever the test says, counting."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.asked = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        assert host == "executor.test"
        self.asked += 1
        return [self.address]


@pytest.fixture
def named(tmp_path: Path, executor: FaultExecutor) -> Path:
    url = executor.url.replace("127.0.0.1", "executor.test")
    return write_project(
        tmp_path / "named",
        url,
        executor.credential,
        executor.signing_key,
        extra_top="readiness: {ttl_s: 600}\n",
    )


async def test_a_binding_connects_to_the_address_pinned_at_readiness(
    named: Path, executor: FaultExecutor
) -> None:
    resolver = Resolver("127.0.0.1")
    async with charter.open(named, store="memory:", audit_file=named / "audit.jsonl") as rt:
        rt.kernel.executors["http"].resolver = resolver  # type: ignore[attr-defined]
        ctx = await rt.resolve_context("app", "shopper")
        state = (await rt.readiness()).get("shop.lookup")
        assert state is not None
        assert (state.ready, state.address) == (True, "127.0.0.1")
        asked = resolver.asked
        for n in range(3):
            env = await rt.call(ctx.context_id, "shop.lookup", f"p{n}", {"item": "pen"}, as_="app")
            assert env.status.value == "succeeded", env.error
        assert resolver.asked == asked  # calls never resolve the name again
        # the name now resolves to the cloud metadata address: calls inside the readiness
        # period still go to the pinned address, never to the new one
        resolver.address = "169.254.169.254"
        env = await rt.call(ctx.context_id, "shop.lookup", "p-pinned", {"item": "a"}, as_="app")
        assert env.status.value == "succeeded"
        # the next readiness check sees the change: refused, and so is the next call
        report = await rt.readiness(fresh=True)
        state = report.get("shop.lookup")
        assert state is not None
        assert (state.ready, state.reason) == (False, "EGRESS_REFUSED")
        assert "169.254.169.254" in (state.message or "")
        before = executor.executions("shop.lookup")
        env = await rt.call(ctx.context_id, "shop.lookup", "p-moved", {"item": "b"}, as_="app")
        assert env.status.value == "failed"
        assert env.error is not None
        assert (env.error["code"], env.error["reason"]) == ("transient_external", "TOOL_NOT_READY")
        assert "EGRESS_REFUSED" in env.error["message"]
        assert executor.executions("shop.lookup") == before  # nothing was sent anywhere
        line = audit_lines(named, "p-moved")[-1]
        assert (line["outcome"], line["reason"]) == ("failed", "TOOL_NOT_READY")
        # another loopback address that egress.allow does not declare: refused as well
        resolver.address = "127.0.0.2"
        state = (await rt.readiness(fresh=True)).get("shop.lookup")
        assert state is not None
        assert state.reason == "EGRESS_REFUSED"
        assert "loopback" in (state.message or "")
        # back where it was: ready again
        resolver.address = "127.0.0.1"
        assert (await rt.readiness(fresh=True)).ready


def test_charter_check_shows_the_pinned_address(project: Path) -> None:
    result = CliRunner().invoke(
        app, ["check", "--json", "--project", str(project)], env={"COLUMNS": "240"}
    )
    assert result.exit_code == 0, result.output
    tools: list[dict[str, Any]] = json.loads(result.stdout)["tools"]
    assert {t["address"] for t in tools} == {"127.0.0.1"}
    table = CliRunner().invoke(app, ["check", "--project", str(project)], env={"COLUMNS": "240"})
    assert "→ 127.0.0.1" in table.stdout


async def test_undeclared_loopback_is_never_connected_to(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    project = write_project(
        tmp_path / "undeclared", executor.url, executor.credential, executor.signing_key, egress=""
    )
    report = await check_readiness(project)
    assert {t.reason for t in report.tools} == {"EGRESS_REFUSED"}


# ---------------------------------------------------------------------------------------
# downstream MCP servers reached by url


async def test_an_mcp_url_server_on_a_refused_address_is_never_connected_to() -> None:
    from charter.contracts.model import ToolContract
    from charter.contracts.tool_context import Context
    from charter.executors.mcp import McpExecutor, McpServerSpec
    from charter.kernel.executor_port import ExecutionRequest

    contract = ToolContract.model_validate(
        {
            "id": "up.lookup",
            "description": "Look a key up.",
            "upstream": {"server": "up", "name": "lookup", "digest": "sha256:" + "0" * 64},
        }
    )
    for address, why in (("169.254.169.254", "metadata"), ("127.0.0.1", "loopback")):
        resolver = Resolver(address)
        executor = McpExecutor(
            servers={"up.lookup": McpServerSpec(url="http://executor.test:9/mcp")},
            redact_message=lambda m, r: m,
            resolver=resolver,
        )
        try:
            problems = await executor.readiness([contract])
            failure = problems["up.lookup"]
            assert getattr(failure, "reason", None) == "EGRESS_REFUSED"
            assert why in str(failure)
            outcome = await executor.execute(
                ExecutionRequest(
                    contract=contract,
                    arguments={"key": "k"},
                    context=Context(
                        call_id="c1", idempotency_key="k1", context_id="x", run_id="r", tool_id="t"
                    ),
                    deadline_s=5,
                )
            )
            assert (outcome.status, outcome.dispatched, outcome.reason) == (
                "failed",
                False,
                "EGRESS_REFUSED",
            )
        finally:
            await executor.aclose()


@pytest.fixture
def mcp_http(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port = free_port()
    count = tmp_path / "lookup.count"
    process = subprocess.Popen(
        [sys.executable, str(HERE / "mcp_http_server.py"), str(port), str(count)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP server did not start") from None
                time.sleep(0.05)
        yield port, count
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_an_mcp_url_server_is_reached_at_its_pinned_address_by_name(
    mcp_http: tuple[int, Path],
) -> None:
    from charter.contracts.model import ToolContract
    from charter.contracts.tool_context import Context
    from charter.executors.mcp import McpExecutor, McpServerSpec, list_upstream, upstream_digest
    from charter.kernel.executor_port import ExecutionRequest

    port, count = mcp_http
    (tool,) = await list_upstream(McpServerSpec(url=f"http://127.0.0.1:{port}/mcp"))
    contract = ToolContract.model_validate(
        {
            "id": "up.lookup",
            "description": tool.description,
            "args_schema": tool.input_schema,
            "upstream": {"server": "up", "name": "lookup", "digest": upstream_digest(tool)},
        }
    )
    resolver = Resolver("127.0.0.1")
    executor = McpExecutor(
        servers={"up.lookup": McpServerSpec(url=f"http://executor.test:{port}/mcp")},
        redact_message=lambda m, r: m,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
        resolver=resolver,
    )
    try:
        assert await executor.readiness([contract]) == {}
        outcome = await executor.execute(
            ExecutionRequest(
                contract=contract,
                arguments={"key": "abc"},
                context=Context(
                    call_id="c1", idempotency_key="k1", context_id="x", run_id="r", tool_id="t"
                ),
                deadline_s=10,
            )
        )
        assert outcome.status == "succeeded", outcome.error
        assert outcome.result == {"value": "ABC"}
        assert count.read_text() == "1"
        assert resolver.asked == 1  # once, when the session opened
    finally:
        await executor.aclose()


class Forwarder:
    """A TCP relay on another loopback address (127.0.0.2, same port) to the executor, so the
    executor's name can really move to a second address; counts the connections it relays."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Forwarder:
        self._server = await asyncio.start_server(self._relay, "127.0.0.2", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def test_a_name_that_moves_is_followed_only_at_readiness_after_a_signed_describe(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    port = int(executor.url.rsplit(":", 1)[1])
    project = write_project(
        tmp_path / "moving",
        f"http://executor.test:{port}",
        executor.credential,
        executor.signing_key,
        extra_top="readiness: {ttl_s: 600}\n",
        egress="egress: {allow: [127.0.0.0/8]}\n",
    )
    resolver = Resolver("127.0.0.1")
    async with (
        charter.open(project, store="memory:") as rt,
        Forwarder(port) as relay,
    ):
        rt.kernel.executors["http"].resolver = resolver  # type: ignore[attr-defined]
        ctx = await rt.resolve_context("app", "shopper")
        resolver.address = "127.0.0.2"  # the name moves: calls stay on the pinned address
        env = await rt.call(ctx.context_id, "shop.lookup", "m1", {"item": "a"}, as_="app")
        assert env.status.value == "succeeded"
        assert relay.connections == 0
        state = (await rt.readiness(fresh=True)).get("shop.lookup")
        assert state is not None
        assert (state.ready, state.address) == (True, "127.0.0.2")
        assert "changed from 127.0.0.1 to 127.0.0.2" in (state.message or "")
        before = executor.executions("shop.lookup")
        env = await rt.call(ctx.context_id, "shop.lookup", "m2", {"item": "b"}, as_="app")
        assert env.status.value == "succeeded", env.error
        assert relay.connections >= 1  # the describe and this call went to the new address
        assert executor.executions("shop.lookup") == before + 1
