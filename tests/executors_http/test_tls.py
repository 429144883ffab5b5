"""Pinned addresses over TLS: the client connects to the address pinned at readiness, and the
certificate is still checked against the executor's host name (sent as the TLS server name),
never against the address. A real executor process serves https on loopback with a
certificate for ``executor.test`` from a private authority the test makes."""

from __future__ import annotations

import datetime
import os
import secrets
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from charter.errors import Failure
from charter.executors.egress import EgressPolicy
from charter.executors.http import HttpEndpoint, HttpExecutor
from tests.executors_http.conftest import REPO, free_port

pytestmark = pytest.mark.anyio

NAME = "executor.test"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A private CA, and a server certificate it signs for ``NAME`` only (no IP SAN)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("charter test CA"))
        .issuer_name(_name("charter test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(NAME))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = (
        directory / "ca.pem",
        directory / "cert.pem",
        directory / "key.pem",
    )
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_file, cert_file, key_file


@dataclass
class TlsExecutor:
    port: int
    ca_file: Path
    credential: str
    signing_key: str


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
        yield TlsExecutor(port, ca_file, credential, signing_key)
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
