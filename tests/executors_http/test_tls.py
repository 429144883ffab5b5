"""Pinned addresses over TLS: the client connects to the address pinned at readiness, and the
certificate is still checked against the executor's host name (sent as the TLS server name),
never against the address. A real executor process serves https on loopback with a
certificate for ``executor.test`` and ``localhost`` from a private authority the test makes.

A binding's ``ca`` (the deployment file) trusts that private authority: a runtime built from
the file calls the executor, the same binding without it fails certificate verification and
nothing runs, and a bad ``ca`` is a deployment error naming the binding and the field."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

import charter
from charter.cli.app import app
from charter.contracts.decorator import declared_contract
from charter.contracts.tool_context import Context
from charter.deploy.deployment import load_deployment
from charter.errors import ConfigError, Failure, TransientExternal
from charter.executors.egress import EgressPolicy
from charter.executors.http import HttpEndpoint, HttpExecutor
from charter.kernel.executor_port import ExecutionRequest
from charter.remote import Journal
from charter.runtime import check_readiness
from tests.executors_http import fault_tools
from tests.executors_http.conftest import REPO, approved_call, free_port, write_project
from tests.private_ca import private_ca

pytestmark = pytest.mark.anyio

NAME = "executor.test"


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A private CA, and a server certificate it signs for ``NAME`` and ``localhost`` only
    (no IP SAN: an address is never what TLS checks)."""
    return private_ca(directory, NAME)


@dataclass
class TlsExecutor:
    port: int
    ca_file: Path
    credential: str
    signing_key: str
    journal: Path

    def executions(self, tool_id: str) -> int:
        """How many calls of ``tool_id`` the executor's own journal records."""
        journal = Journal(self.journal)
        try:
            return journal.count(tool_id=tool_id)
        finally:
            journal.close()


@pytest.fixture(scope="module")
def tls_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsExecutor]:
    directory = tmp_path_factory.mktemp("tls-executor")
    ca_file, cert_file, key_file = _certificates(directory)
    port = free_port()
    credential, signing_key = secrets.token_hex(24), secrets.token_hex(24)
    env = {
        **os.environ,
        "FAULT_DB": str(directory / "business.db"),
        "FAULT_JOURNAL": str(directory / "journal.db"),
        "CHARTER_EXECUTOR_CREDENTIAL": credential,
        "CHARTER_EXECUTOR_SIGNING_KEY": signing_key,
    }
    log = (directory / "executor.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.executors_http.fault_app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ssl-keyfile",
            str(key_file),
            "--ssl-certfile",
            str(cert_file),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the executor process exited with {process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the executor did not come up within 30 s") from None
                time.sleep(0.05)
        yield TlsExecutor(port, ca_file, credential, signing_key, directory / "journal.db")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class Resolver:
    """Every name resolves to loopback (the pinned address); counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return ["127.0.0.1"]


def _client(tls: TlsExecutor, resolver: Resolver, *urls: str) -> HttpExecutor:
    trusted = ssl.create_default_context(cafile=str(tls.ca_file))
    endpoints = {
        f"t{n}": HttpEndpoint(
            url=url, credential=tls.credential.encode(), signing_key=tls.signing_key.encode()
        )
        for n, url in enumerate(urls)
    }
    return HttpExecutor(
        endpoints=endpoints,
        redact_message=lambda message, _request: message,
        verify=trusted,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
        resolver=resolver,
    )


async def test_the_pinned_address_is_reached_and_the_certificate_checked_for_the_name(
    tls_executor: TlsExecutor,
) -> None:
    """The certificate names ``executor.test`` only (no IP address): describe succeeds over
    the pinned ``127.0.0.1`` only because the name is what TLS verifies."""
    resolver = Resolver()
    client = _client(tls_executor, resolver, f"https://{NAME}:{tls_executor.port}")
    try:
        described = await client.describe(client.endpoints["t0"])
        assert described.address == "127.0.0.1"
        assert "shop.lookup" in described.tools
        assert resolver.asked == [NAME]
    finally:
        await client.aclose()


@pytest.mark.parametrize("first", [False, True])
async def test_a_name_the_certificate_does_not_cover_is_refused_on_the_same_address(
    tls_executor: TlsExecutor, first: bool
) -> None:
    """Another name pinned to the same address is checked on its own — also when a
    connection verified for ``executor.test`` to that address is already open — so its
    credential and signed request never reach a server that cannot prove that name."""
    port = tls_executor.port
    client = _client(
        tls_executor, Resolver(), f"https://{NAME}:{port}", f"https://impostor.test:{port}"
    )
    try:
        if first:
            await client.describe(client.endpoints["t0"])  # a verified connection is kept
        with pytest.raises(Failure) as refused:
            await client.describe(client.endpoints["t1"])
        assert refused.value.reason == "EXECUTOR_UNREACHABLE"
    finally:
        await client.aclose()


# ---------------------------------------------------------------------------------------
# the binding's `ca`: a private certificate authority, from the deployment file


def _tls_project(directory: Path, tls: TlsExecutor, ca: str | None) -> Path:
    """The shop project bound over https to the executor by name (``localhost``: the
    system resolver), with ``ca`` on both bindings, or without it."""
    extra = f", ca: {ca}" if ca is not None else ""
    project = write_project(
        directory, f"https://localhost:{tls.port}", tls.credential, tls.signing_key
    )
    deploy = project / "charter.deploy.yaml"
    text = deploy.read_text().replace(
        "max_response_bytes: 65536", "max_response_bytes: 65536" + extra
    )
    deploy.write_text(text)
    (project / "certs").mkdir()
    shutil.copy(tls.ca_file, project / "certs" / "ca.pem")
    return project


async def test_a_binding_with_the_private_ca_is_trusted_end_to_end(
    tmp_path: Path, tls_executor: TlsExecutor
) -> None:
    """``ca: {file: certs/ca.pem}`` (relative to the deployment file): readiness describes the
    executor over TLS and an approved write runs there once, by the executor's journal."""
    project = _tls_project(tmp_path / "shop", tls_executor, "{file: certs/ca.pem}")
    report = await check_readiness(project)
    assert report.ready, [(t.tool_id, t.reason, t.message) for t in report.tools]
    before = tls_executor.executions("shop.order")
    async with charter.open(project, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "shopper")
        found = await rt.call(ctx.context_id, "shop.lookup", "ca-1", {"item": "pen"}, as_="app")
        assert found.status.value == "succeeded", found
        ordered = await approved_call(rt, ctx.context_id, "shop.order", "ca-2", {"item": "pen"})
        assert ordered.status.value == "succeeded", ordered
    assert tls_executor.executions("shop.order") == before + 1


async def test_the_same_binding_without_the_ca_fails_certificate_verification(
    tmp_path: Path, tls_executor: TlsExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``ca`` the system trust store does not know the private authority (and
    ``SSL_CERT_FILE`` naming it is not read): the tool is not ready (the reason says the
    certificate did not verify), no context offers it, and the executor runs nothing."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_executor.ca_file))
    project = _tls_project(tmp_path / "shop", tls_executor, None)
    before = tls_executor.executions("shop.order")
    report = await check_readiness(project)
    order = report.get("shop.order")
    assert order is not None
    assert (order.ready, order.reason) == (False, "EXECUTOR_UNREACHABLE")
    assert "TLS certificate verification failed" in (order.message or ""), order.message
    async with charter.open(project, store="memory:") as rt:
        with pytest.raises(TransientExternal) as raised:
            await rt.resolve_context("app", "shopper")
    assert raised.value.reason == "TOOL_NOT_READY"
    assert tls_executor.executions("shop.order") == before


async def test_each_trust_has_its_own_connections_to_the_same_name(
    tls_executor: TlsExecutor,
) -> None:
    """Two bindings of one name and address, one with the CA and one without: a connection
    verified against the CA never carries the other binding's call — its execute is refused
    before anything is sent, and the executor's journal records only the trusted call."""
    url = f"https://{NAME}:{tls_executor.port}"
    keys = {"credential": tls_executor.credential.encode()}
    keys["signing_key"] = tls_executor.signing_key.encode()
    with_ca = HttpEndpoint(url=url, ca=tls_executor.ca_file.read_text(), **keys)
    client = HttpExecutor(
        endpoints={"shop.order": with_ca},
        redact_message=lambda message, _request: message,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
        resolver=Resolver(),
    )
    without = HttpExecutor(
        endpoints={"shop.order": HttpEndpoint(url=url, **keys)},
        redact_message=lambda message, _request: message,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
        resolver=Resolver(),
    )
    try:
        described = await client.describe(with_ca)  # a verified connection is kept open
        assert "shop.order" in described.tools
        plain = HttpEndpoint(url=url, **keys)
        with pytest.raises(Failure) as refused:
            await client.describe(plain)
        assert "TLS certificate verification failed" in refused.value.message
        before = tls_executor.executions("shop.order")
        request = _order_request("tls-1")
        outcome = await without.execute(request)
        assert outcome.error is not None
        assert not outcome.dispatched
        assert outcome.error.reason == "EXECUTOR_UNREACHABLE"
        assert "TLS certificate verification failed" in outcome.error.message
        assert tls_executor.executions("shop.order") == before
        done = await client.execute(_order_request("tls-2"))
        assert done.status == "succeeded", done.error
        assert tls_executor.executions("shop.order") == before + 1
    finally:
        await client.aclose()
        await without.aclose()


def _order_request(call_id: str) -> ExecutionRequest:
    return ExecutionRequest(
        contract=declared_contract(fault_tools.order),
        arguments={"item": "ink"},
        context=Context(
            call_id=call_id,
            idempotency_key=f"idk-{call_id}-{secrets.token_hex(8)}",
            context_id="x",
            run_id="r",
            tool_id="shop.order",
        ),
        deadline_s=10,
    )


def _junk_files(directory: Path) -> None:
    (directory / "certs" / "empty.pem").write_text("")
    (directory / "certs" / "key.pem").write_text(
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49\n-----END PRIVATE KEY-----\n"
    )
    (directory / "certs" / "broken.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
    )
    (directory / "certs" / "ca.der").write_bytes(b"\x30\x82\x01\x0a\xff\xfe" * 8)
    (directory / "certs" / "unreadable.pem").mkdir()  # a directory: cannot be read
    (directory / "certs" / "big.pem").write_bytes(b"#" * (1024 * 1024 + 1))


@pytest.mark.parametrize(
    ("ca", "problem"),
    [
        ("{file: certs/missing.pem}", "certs/missing.pem does not exist"),
        ("{file: certs/unreadable.pem}", "cannot read the CA file"),
        ("{file: certs/empty.pem}", "has no PEM certificate"),
        ("{file: certs/big.pem}", "is larger than 1048576 bytes"),
        ("{file: certs/key.pem}", "has no PEM certificate"),
        ("{file: certs/ca.der}", "has no PEM certificate"),
        ("{file: certs/broken.pem}", "has a PEM certificate that does not load"),
        ("{env: CHARTER_TEST_NO_SUCH_CA}", "environment variable CHARTER_TEST_NO_SUCH_CA"),
        ("certs/ca.pem", "must be {file: PATH}"),
        ("{file: certs/ca.pem, env: X}", "must be {file: PATH}"),
        ("{path: certs/ca.pem}", "unknown field"),
    ],
)
def test_a_bad_ca_is_a_deployment_error_naming_the_binding_and_the_field(
    tmp_path: Path, tls_executor: TlsExecutor, ca: str, problem: str
) -> None:
    """At load (``charter check``, start-up): one line naming the file, the binding and the
    field; the CLI prints it without a traceback."""
    project = _tls_project(tmp_path / "shop", tls_executor, ca)
    _junk_files(project)
    with pytest.raises(ConfigError) as raised:
        load_deployment(None, project_dir=project, env={})
    message = str(raised.value)
    assert "charter.deploy.yaml: bindings.shop.lookup.ca" in message, message
    assert problem in message, message
    result = CliRunner().invoke(app, ["check", "--project", str(project)], env={"COLUMNS": "240"})
    assert result.exit_code != 0
    assert "bindings.shop.lookup.ca" in result.output, result.output
    assert "Traceback" not in result.output
    assert tls_executor.credential not in result.output


def test_a_ca_on_a_plain_http_url_is_refused(tmp_path: Path, tls_executor: TlsExecutor) -> None:
    project = _tls_project(tmp_path / "shop", tls_executor, "{file: certs/ca.pem}")
    deploy = project / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text().replace("https://", "http://"))
    with pytest.raises(ConfigError) as raised:
        load_deployment(None, project_dir=project, env={})
    assert "bindings.shop.lookup.ca: applies to https:// urls only" in str(raised.value)


async def test_startup_refuses_a_missing_ca(tmp_path: Path, tls_executor: TlsExecutor) -> None:
    project = _tls_project(tmp_path / "shop", tls_executor, "{file: certs/gone.pem}")
    with pytest.raises(ConfigError) as raised:
        async with charter.open(project, store="memory:"):
            pass
    assert "bindings.shop.lookup.ca: the CA file" in str(raised.value)


def test_the_ca_is_shown_by_reference_and_may_come_from_the_environment(
    tmp_path: Path, tls_executor: TlsExecutor
) -> None:
    project = _tls_project(tmp_path / "shop", tls_executor, "{env: SHOP_CA}")
    pem = tls_executor.ca_file.read_text()
    deployment = load_deployment(None, project_dir=project, env={"SHOP_CA": pem})
    shown = deployment.describe()["bindings"]["shop.lookup"]
    assert shown["ca"] == "env:SHOP_CA"
    assert "BEGIN CERTIFICATE" not in repr(deployment.describe())
    filed = load_deployment(
        None,
        project_dir=_tls_project(tmp_path / "filed", tls_executor, "{file: certs/ca.pem}"),
        env={},
    )
    assert filed.describe()["bindings"]["shop.order"]["ca"] == (
        f"file:{tmp_path / 'filed' / 'certs' / 'ca.pem'}"
    )
