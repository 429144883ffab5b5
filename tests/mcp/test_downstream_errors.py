"""A downstream MCP server over streamable HTTP that checks its bearer credential and answers
some tool calls with JSON-RPC errors (``guarded_http_server.py``, a real SDK server).

- A JSON-RPC error to a *write* after the request was sent does not prove the tool did not
  run (the SDK itself sends ``-32603`` or ``-32602`` for an exception raised after an
  effect): the call is ``unknown``, never ``failed``; only ``-32700``/``-32600``/``-32601``
  (the request was never taken up as a tool call) is ``failed``, not dispatched. A read is
  ``failed``.
- Two bindings of one server url with different credentials are checked for readiness each
  with its own credential: the one the server refuses is not ready, whatever the other's.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import charter
from charter.contracts.model import ToolContract
from charter.contracts.tool_context import Context
from charter.executors.egress import EgressPolicy
from charter.executors.mcp import McpExecutor, McpServerSpec, list_upstream, upstream_digest
from charter.executors.mcp_import import import_contracts
from charter.kernel.executor_port import ExecutionRequest
from tests.executors_http.conftest import free_port, wait_until_up
from tests.mcp._project import make_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SERVER = Path(__file__).with_name("guarded_http_server.py")
TOKEN = "downstream-token-0123456789"


@dataclass
class Guarded:
    url: str
    home: Path

    def count(self, name: str) -> int:
        path = self.home / f"{name}.count"
        return int(path.read_text()) if path.exists() else 0


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    home = tmp_path_factory.mktemp("guarded-mcp")
    port = free_port()
    argv = [sys.executable, str(SERVER), str(port), str(home), TOKEN]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process, "/mcp")
        (home / "refused.count").unlink(missing_ok=True)  # the probe above
        yield Guarded(f"http://127.0.0.1:{port}/mcp", home)
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _contract(guarded: Guarded, tool_id: str, effect: str) -> ToolContract:
    (tool,) = await list_upstream(McpServerSpec(url=guarded.url, credential=TOKEN.encode()))
    return ToolContract.model_validate(
        {
            "id": tool_id,
            "description": tool.description,
            "args_schema": tool.input_schema,
            "effect": effect,
            "upstream": {"server": "up", "name": "change", "digest": upstream_digest(tool)},
        }
    )


def _executor(servers: dict[str, McpServerSpec]) -> McpExecutor:
    return McpExecutor(
        servers=servers,
        redact_message=lambda message, _request: message,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
    )


def _request(contract: ToolContract, key: str) -> ExecutionRequest:
    context = Context(
        call_id=f"c-{key}", idempotency_key=f"k-{key}", context_id="x", run_id="r",
        tool_id=contract.id,
    )  # fmt: skip
    return ExecutionRequest(
        contract=contract, arguments={"key": key}, context=context, deadline_s=10
    )


@pytest.mark.parametrize(
    ("key", "effect", "status", "dispatched", "reason", "ran"),
    [
        # the tool ran, then the server answered an error: a write's effect is in doubt
        ("internal", "write", "unknown", True, "UPSTREAM_PROTOCOL_ERROR", 1),
        ("invalid", "write", "unknown", True, "UPSTREAM_PROTOCOL_ERROR", 1),
        # a read has no effect to repeat
        ("internal", "read", "failed", True, "UPSTREAM_PROTOCOL_ERROR", 1),
        # the server never took the request up as a tool call: refused, nothing ran
        ("unsupported", "write", "failed", False, "UPSTREAM_REFUSED", 0),
    ],
)
async def test_a_json_rpc_error_after_sending_a_write_is_unknown(
    guarded: Guarded, key: str, effect: str, status: str, dispatched: bool, reason: str, ran: int
) -> None:
    contract = await _contract(guarded, f"up.{effect}", effect)
    executor = _executor({contract.id: McpServerSpec(url=guarded.url, credential=TOKEN.encode())})
    before = guarded.count("change")
    try:
        outcome = await executor.execute(_request(contract, key))
    finally:
        await executor.aclose()
    assert (outcome.status, outcome.dispatched, outcome.reason) == (status, dispatched, reason)
    assert outcome.error is not None
    assert str(outcome.error.details.get("jsonrpc_code")).startswith("-326")
    if status == "unknown":
        assert "may or may not have happened" in outcome.error.message
    assert guarded.count("change") == before + ran


async def test_each_credential_is_checked_for_readiness_with_its_own_session(
    guarded: Guarded,
) -> None:
    """Two bindings of one server url, one with the server's token and one with a stale one:
    the stale binding is not ready (the server refused its own listing), whichever binding
    comes first, and its call is refused before anything is sent; the good one runs."""
    good = await _contract(guarded, "up.good", "write")
    stale = await _contract(guarded, "up.stale", "write")
    for order in ((stale, good), (good, stale)):
        executor = _executor(
            {
                "up.good": McpServerSpec(url=guarded.url, credential=TOKEN.encode()),
                "up.stale": McpServerSpec(url=guarded.url, credential=b"stale-token-0123456789"),
            }
        )
        refused, ran = guarded.count("refused"), guarded.count("change")
        try:
            not_ready = await executor.readiness(list(order))
            assert list(not_ready) == ["up.stale"], not_ready
            # refused, as an http executor's describe with a wrong credential is
            assert getattr(not_ready["up.stale"], "reason", None) == "EXECUTOR_REFUSED"
            assert "HTTP 401" in str(not_ready["up.stale"]), not_ready["up.stale"]
            assert "credential" in str(not_ready["up.stale"])
            assert guarded.count("refused") > refused  # its own credential was sent and refused
            done = await executor.execute(_request(good, "fine"))
            assert done.status == "succeeded", done.error
            outcome = await executor.execute(_request(stale, "never"))
            assert (outcome.status, outcome.dispatched) == ("failed", False), outcome.error
            assert outcome.reason == "EXECUTOR_REFUSED"
            assert outcome.error is not None
            assert outcome.error.code.value == "permission_denied"
        finally:
            await executor.aclose()
        assert guarded.count("change") == ran + 1


async def _governed(root: Path, guarded: Guarded, effect: str) -> Path:
    """A project whose ``up.change`` (effect ``effect``) is the guarded server's tool, imported
    and pinned, bound by url with the server's token."""
    spec = McpServerSpec(url=guarded.url, credential=TOKEN.encode())
    written = await import_contracts(spec, project=root, prefix="up")
    tools = root / written["file"]
    tools.write_text(tools.read_text().replace("effect: write", f"effect: {effect}"))
    binding = (
        "egress: {allow: [127.0.0.1/32]}\n"
        "bindings:\n"
        "  up.change:\n"
        "    executor: mcp\n"
        f"    url: {guarded.url}\n"
        "    credential: {env: GUARDED_MCP_TOKEN}\n"
    )
    profile = "\n  down:\n    description: The guarded tool.\n    include: [up.change]\n"
    make_project(root, with_yaml_glob=True, extra_profiles=profile, extra_deploy=binding)
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace("enable: [svc.store]", "enable: [svc.store, up.change]")
    )
    return root


@pytest.mark.parametrize(("effect", "status"), [("read", "failed"), ("write", "unknown")])
async def test_a_result_against_the_tools_own_output_schema_is_the_kernels_to_judge(
    tmp_path: Path, guarded: Guarded, monkeypatch: pytest.MonkeyPatch, effect: str, status: str
) -> None:
    """The tool ran and answered structured content its own output schema refuses. The SDK
    client raised on it, which the executor took for a broken connection: ``unknown`` /
    ``EXECUTOR_CONNECTION_LOST`` for a read too, and the kept session closed. Now the kernel
    checks the result against the pinned ``result_schema``: ``RESULT_SCHEMA_MISMATCH``,
    ``failed`` for a read, ``unknown`` for a write; it ran once and is never sent again."""
    monkeypatch.setenv("GUARDED_MCP_TOKEN", TOKEN)
    project = await _governed(tmp_path, guarded, effect)
    before = guarded.count("change")
    async with charter.open(project, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "down")
        done = await rt.call(ctx.context_id, "up.change", "bad-1", {"key": "badshape"}, as_="app")
        if effect == "write":
            assert done.approval is not None
            await rt.approve(done.approval["id"], as_="alice")
            done = await rt.call(
                ctx.context_id, "up.change", "bad-1", {"key": "badshape"}, as_="app"
            )
        assert done.status.value == status, done.error
        assert done.error is not None
        assert done.error["reason"] == "RESULT_SCHEMA_MISMATCH", done.error
        again = await rt.call(ctx.context_id, "up.change", "bad-1", {"key": "badshape"}, as_="app")
        assert again.status.value == status
        assert guarded.count("change") == before + 1
