"""A downstream MCP server over https behind a private certificate authority.

A real MCP SDK server (streamable HTTP, uvicorn on loopback) presents a certificate for
``localhost`` signed by a CA the test makes. An ``executor: mcp`` binding's ``ca`` trusts that
authority: a runtime built from the deployment file lists the server's tools (readiness, the
digest check) and calls it; the same binding without ``ca`` is not ready, says the
certificate did not verify, and nothing reaches the server. ``charter import-mcp --ca FILE``
lists the tools the same way. A bad ``ca`` is a deployment error naming the binding and field.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import charter
from charter.cli.app import app
from charter.contracts.model import ToolContract
from charter.contracts.tool_context import Context
from charter.deploy.deployment import load_deployment
from charter.errors import ConfigError, Failure, TransientExternal
from charter.executors.egress import EgressPolicy
from charter.executors.mcp import McpExecutor, McpServerSpec, list_upstream, upstream_digest
from charter.executors.mcp_import import import_contracts
from charter.kernel.executor_port import ExecutionRequest
from charter.runtime import check_readiness
from tests.executors_http.conftest import free_port
from tests.mcp._project import make_project
from tests.private_ca import private_ca

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SERVER = Path(__file__).parents[1] / "executors_http" / "mcp_http_server.py"
PROFILE = """
  down:
    description: The downstream server's tool.
    include: [up.lookup]
"""


@dataclass
class HttpsServer:
    port: int
    ca_file: Path
    count_file: Path

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}/mcp"

    def calls(self) -> int:
        return int(self.count_file.read_text()) if self.count_file.exists() else 0


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsServer]:
    directory = tmp_path_factory.mktemp("mcp-https")
    ca_file, cert_file, key_file = private_ca(directory, "mcp.test")
    port = free_port()
    count = directory / "lookup.count"
    log = (directory / "server.log").open("wb")
    argv = [sys.executable, str(SERVER), str(port), str(count), str(cert_file), str(key_file)]
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP server did not start") from None
                time.sleep(0.05)
        yield HttpsServer(port, ca_file, count)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _binding(server: HttpsServer, ca: str | None, *, url: str | None = None) -> str:
    lines = [
        "egress: {allow: [127.0.0.1/32]}",
        "bindings:",
        "  up.lookup:",
        "    executor: mcp",
        f"    url: {url or server.url}",
    ]
    if ca is not None:
        lines.append(f"    ca: {ca}")
    return "\n".join(lines) + "\n"


async def _project(root: Path, server: HttpsServer, ca: str | None) -> Path:
    """The project bound to the https server by name (``localhost``: the system resolver),
    its contract imported over the private CA and pinned; ``ca`` on the binding or not."""
    (root / "certs").mkdir(parents=True)
    shutil.copy(server.ca_file, root / "certs" / "ca.pem")
    spec = McpServerSpec(url=server.url, ca=server.ca_file.read_text())
    written = await import_contracts(spec, project=root, prefix="up")
    tools_file = root / written["file"]
    tools_file.write_text(tools_file.read_text().replace("effect: write", "effect: read"))
    make_project(
        root, with_yaml_glob=True, extra_profiles=PROFILE, extra_deploy=_binding(server, ca)
    )
    return root


async def test_a_binding_with_the_private_ca_is_ready_and_called(
    tmp_path: Path, https_server: HttpsServer
) -> None:
    """``ca: {file: certs/ca.pem}`` (relative to the deployment file): readiness lists the
    server's tools over TLS and checks the pinned digest; a call runs there once."""
    project = await _project(tmp_path, https_server, "{file: certs/ca.pem}")
    report = await check_readiness(project)
    lookup = report.get("up.lookup")
    assert lookup is not None
    assert lookup.ready, (lookup.reason, lookup.message)
    before = https_server.calls()
    async with charter.open(project, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "down")
        done = await rt.call(ctx.context_id, "up.lookup", "ca-1", {"key": "pen"}, as_="app")
        assert done.status.value == "succeeded", done.error
        assert done.data == {"value": "PEN"}
    assert https_server.calls() == before + 1


async def test_the_same_binding_without_the_ca_is_not_ready_and_nothing_is_sent(
    tmp_path: Path, https_server: HttpsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``ca`` only the system trust store is used (``SSL_CERT_FILE`` naming the CA
    is not read): the tool is not ready with the certificate's reason, no context offers
    it, and the server runs nothing."""
    project = await _project(tmp_path, https_server, None)
    monkeypatch.setenv("SSL_CERT_FILE", str(https_server.ca_file))
    before = https_server.calls()
    report = await check_readiness(project)
    lookup = report.get("up.lookup")
    assert lookup is not None
    assert (lookup.ready, lookup.reason) == (False, "EXECUTOR_UNREACHABLE")
    assert "TLS certificate verification failed" in (lookup.message or ""), lookup.message
    assert "needs the binding's `ca`" in (lookup.message or "")
    async with charter.open(project, store="memory:") as rt:
        with pytest.raises(TransientExternal) as raised:
            await rt.resolve_context("app", "down")
    assert raised.value.reason == "TOOL_NOT_READY"
    assert https_server.calls() == before


async def test_listing_without_the_ca_names_the_certificate(https_server: HttpsServer) -> None:
    with pytest.raises(Failure) as raised:
        await list_upstream(McpServerSpec(url=https_server.url))
    assert raised.value.reason == "EXECUTOR_UNREACHABLE"
    assert "TLS certificate verification failed" in raised.value.message


async def test_each_trust_has_its_own_session_to_the_same_server(
    https_server: HttpsServer,
) -> None:
    """Two tools on one server url, one binding with the CA and one without: the verified
    session never carries the other's call — it fails before anything is sent, naming the
    certificate — and the server runs only the trusted call."""
    pem = https_server.ca_file.read_text()
    (tool,) = await list_upstream(McpServerSpec(url=https_server.url, ca=pem))
    contracts = {
        tool_id: ToolContract.model_validate(
            {
                "id": tool_id,
                "description": tool.description,
                "args_schema": tool.input_schema,
                "upstream": {"server": "up", "name": "lookup", "digest": upstream_digest(tool)},
            }
        )
        for tool_id in ("up.trusted", "up.plain")
    }
    executor = McpExecutor(
        servers={
            "up.trusted": McpServerSpec(url=https_server.url, ca=pem),
            "up.plain": McpServerSpec(url=https_server.url),
        },
        redact_message=lambda message, _request: message,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
    )

    def request(tool_id: str) -> ExecutionRequest:
        context = Context(
            call_id=tool_id, idempotency_key=f"k-{tool_id}", context_id="x", run_id="r",
            tool_id=tool_id,
        )  # fmt: skip
        args = {"key": "ink"}
        return ExecutionRequest(
            contract=contracts[tool_id], arguments=args, context=context, deadline_s=10
        )

    before = https_server.calls()
    try:
        not_ready = await executor.readiness(list(contracts.values()))
        assert list(not_ready) == ["up.plain"]
        assert "TLS certificate verification failed" in str(not_ready["up.plain"])
        done = await executor.execute(request("up.trusted"))  # its session stays open
        assert done.status == "succeeded", done.error
        refused = await executor.execute(request("up.plain"))
        assert (refused.status, refused.dispatched) == ("failed", False)
        assert refused.error is not None
        assert refused.error.reason == "EXECUTOR_UNREACHABLE"
        assert "TLS certificate verification failed" in refused.error.message
    finally:
        await executor.aclose()
    assert https_server.calls() == before + 1


def test_import_mcp_takes_the_ca_and_writes_it_into_the_binding_hint(
    tmp_path: Path, https_server: HttpsServer
) -> None:
    (tmp_path / "certs").mkdir()
    shutil.copy(https_server.ca_file, tmp_path / "certs" / "ca.pem")
    runner = CliRunner()
    base = ["import-mcp", "--url", https_server.url, "--prefix", "up", "--project", str(tmp_path)]
    env = {"COLUMNS": "240"}
    refused = runner.invoke(app, base, env=env)
    assert refused.exit_code != 0
    assert "TLS certificate verification failed" in refused.output, refused.output
    assert "--ca FILE" in refused.output
    assert "Traceback" not in refused.output
    assert not (tmp_path / "tools" / "mcp-up.yaml").exists()
    done = runner.invoke(app, [*base, "--ca", str(tmp_path / "certs" / "ca.pem")], env=env)
    assert done.exit_code == 0, done.output
    written = yaml.safe_load((tmp_path / "tools" / "mcp-up.yaml").read_text())
    assert [t["id"] for t in written["tools"]] == ["up.lookup"]
    hint = yaml.safe_load(done.stdout)
    assert hint["bindings"]["up.lookup"]["ca"] == {"file": "certs/ca.pem"}
    assert hint["bindings"]["up.lookup"]["url"] == https_server.url


@pytest.mark.parametrize(
    ("url", "ca", "problem"),
    [
        ("http://localhost:9/mcp", "the CA", "--ca applies to an https:// --url"),
        (None, "certs/missing.pem", "--ca: the CA file"),
        (None, "certs/empty.pem", "--ca: file:"),
    ],
)
def test_import_mcp_refuses_a_bad_ca(
    tmp_path: Path, https_server: HttpsServer, url: str | None, ca: str, problem: str
) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "empty.pem").write_text("")
    ca_path = str(https_server.ca_file) if ca == "the CA" else str(tmp_path / ca)
    argv = ["import-mcp", "--url", url or https_server.url, "--ca", ca_path]
    result = CliRunner().invoke(app, [*argv, "--project", str(tmp_path)], env={"COLUMNS": "240"})
    assert result.exit_code != 0
    assert problem in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "tools").exists()


# ---------------------------------------------------------------------------------------
# the field's errors, at load (charter check and start-up alike)


def _junk(directory: Path) -> None:
    (directory / "certs" / "empty.pem").write_text("")
    (directory / "certs" / "broken.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
    )
    (directory / "certs" / "ca.der").write_bytes(b"\x30\x82\x01\x0a\xff\xfe" * 8)


@pytest.mark.parametrize(
    ("ca", "problem"),
    [
        ("{file: certs/missing.pem}", "certs/missing.pem does not exist"),
        ("{file: certs/empty.pem}", "has no PEM certificate"),
        ("{file: certs/ca.der}", "has no PEM certificate"),
        ("{file: certs/broken.pem}", "has a PEM certificate that does not load"),
        ("{env: CHARTER_TEST_NO_SUCH_CA}", "environment variable CHARTER_TEST_NO_SUCH_CA"),
        ("certs/ca.pem", "must be {file: PATH}"),
        ("{path: certs/ca.pem}", "unknown field"),
    ],
)
def test_a_bad_ca_is_a_deployment_error_naming_the_binding_and_the_field(
    tmp_path: Path, https_server: HttpsServer, ca: str, problem: str
) -> None:
    make_project(tmp_path, extra_deploy=_binding(https_server, ca))
    (tmp_path / "certs").mkdir()
    _junk(tmp_path)
    with pytest.raises(ConfigError) as raised:
        load_deployment(None, project_dir=tmp_path, env={})
    message = str(raised.value)
    assert "charter.deploy.yaml: bindings.up.lookup.ca" in message, message
    assert problem in message, message
    result = CliRunner().invoke(app, ["check", "--project", str(tmp_path)], env={"COLUMNS": "240"})
    assert result.exit_code != 0
    assert "bindings.up.lookup.ca" in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("http://localhost:9/mcp", "bindings.up.lookup.ca: applies to https:// urls only"),
        ("command", "bindings.up.lookup.ca: applies to `url` servers only"),
    ],
)
def test_a_ca_on_a_plain_url_or_a_command_is_refused(
    tmp_path: Path, https_server: HttpsServer, where: str, problem: str
) -> None:
    deploy = _binding(https_server, "{file: certs/ca.pem}", url=where)
    if where == "command":
        deploy = deploy.replace("url: command", "command: [python, server.py]")
    make_project(tmp_path, extra_deploy=deploy)
    (tmp_path / "certs").mkdir()
    shutil.copy(https_server.ca_file, tmp_path / "certs" / "ca.pem")
    with pytest.raises(ConfigError) as raised:
        load_deployment(None, project_dir=tmp_path, env={})
    assert problem in str(raised.value), raised.value


def test_the_ca_is_shown_by_reference_and_may_come_from_the_environment(
    tmp_path: Path, https_server: HttpsServer
) -> None:
    make_project(tmp_path, extra_deploy=_binding(https_server, "{env: DOWN_CA}"))
    pem = https_server.ca_file.read_text()
    deployment = load_deployment(None, project_dir=tmp_path, env={"DOWN_CA": pem})
    assert deployment.describe()["bindings"]["up.lookup"]["ca"] == "env:DOWN_CA"
    assert "BEGIN CERTIFICATE" not in repr(deployment.describe())
