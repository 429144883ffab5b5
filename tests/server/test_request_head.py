"""A request head is bounded under both of uvicorn's HTTP implementations (``charter serve
--http httptools|h11``, server/http_head.py).

Before: with httptools a client could send megabytes of header fields — one huge field or
100,000 small ones — and the server buffered them all; an overlong URL was a plain-text 400
(h11: any head over 16 KiB); a head trickled a byte at a time held its connection for ever.
Now: 414 ``URL_TOO_LONG``, 431 ``HEADERS_TOO_LARGE``, 408 ``HEADERS_TIMEOUT``, each a problem
document, the connection closed, nothing the client sent quoted back, and the server's memory
does not grow with the flood.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from tests.server._harness import spawn_serve_process, write_served_project

CANARY = b"s3cr3t-canary-"  # in every flood: never in an answer
HEAD = b"GET /v1/runs HTTP/1.1\r\nHost: charter\r\n"
MiB = 1024 * 1024


@dataclass(frozen=True)
class Served:
    url: str
    pid: int

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").split(":")
        return host, int(port)


@pytest.fixture(scope="module", params=["httptools", "h11"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    project = write_served_project(tmp_path_factory.mktemp("head"))
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + "limits:\n  http:\n    head_timeout_s: 2\n")
    with spawn_serve_process(
        Path(project.root), "sqlite:///.charter/charter.db", args=["--http", request.param]
    ) as (url, proc):
        yield Served(url, proc.pid)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes

    def problem(self) -> dict[str, object]:
        assert self.headers.get("content-type") == "application/problem+json", self.raw[:300]
        doc: dict[str, object] = json.loads(self.body)
        return doc


def exchange(served: Served, parts: Iterable[bytes], *, timeout: float = 15) -> Answer:
    """Send ``parts`` (as long as the server takes them), then read the answer to its end:
    the server must close the connection after it."""
    with socket.create_connection(served.address, timeout=timeout) as sock:
        try:
            for part in parts:
                sock.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: its answer is waiting
        raw = b""
        try:
            while chunk := sock.recv(65536):
                raw += chunk
        except ConnectionResetError:
            pass
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), raw[:300]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(lines[0].split()[1]), headers, body, raw)


def refused(answer: Answer, status: int, reason: str) -> dict[str, object]:
    assert answer.status == status, answer.raw[:300]
    doc = answer.problem()
    assert doc["reason"] == reason
    assert doc["status"] == status
    assert doc["code"] == "invalid_input"
    assert answer.headers.get("connection") == "close"
    assert CANARY not in answer.raw
    assert b"x-flood" not in answer.raw.lower()
    return doc


def still_serves(served: Served) -> None:
    assert httpx2.get(f"{served.url}/healthz", timeout=10).status_code == 200


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def one_huge_header(size: int) -> Iterator[bytes]:
    yield HEAD + b"X-Flood: " + CANARY
    piece = CANARY * (64 * 1024 // len(CANARY))
    for _ in range(size // len(piece)):
        yield piece


def test_one_huge_header_is_431_and_memory_does_not_grow_with_it(served: Served) -> None:
    still_serves(served)
    before = rss(served.pid)
    answer = exchange(served, one_huge_header(48 * MiB))
    doc = refused(answer, 431, "HEADERS_TOO_LARGE")
    assert "32768 bytes" in str(doc["detail"])
    grown = rss(served.pid) - before
    assert grown < 8 * MiB, f"the server grew by {grown} bytes"
    still_serves(served)


def test_a_hundred_thousand_small_headers_are_431(served: Served) -> None:
    fields = b"".join(b"X-Flood-%d: %s\r\n" % (i, CANARY) for i in range(100_000))
    answer = exchange(served, [HEAD, fields, b"\r\n"])
    refused(answer, 431, "HEADERS_TOO_LARGE")
    still_serves(served)


def test_more_than_a_hundred_header_fields_within_the_size_is_431(served: Served) -> None:
    fields = b"".join(b"X-Flood-%d: v\r\n" % i for i in range(150))  # about 2 KiB
    answer = exchange(served, [HEAD, fields, b"\r\n"])
    doc = refused(answer, 431, "HEADERS_TOO_LARGE")
    assert doc["detail"] == "the request has more than 100 header fields"
    still_serves(served)


def test_one_header_field_over_its_bound_is_431(served: Served) -> None:
    answer = exchange(served, [HEAD, b"X-Flood: " + CANARY * 1000 + b"\r\n\r\n"])  # 14 KB
    doc = refused(answer, 431, "HEADERS_TOO_LARGE")
    assert doc["detail"] == "a header field is larger than 8192 bytes"
    still_serves(served)


@pytest.mark.parametrize("size", [12 * 1024, 4 * MiB])
def test_a_url_too_long_is_414(served: Served, size: int) -> None:
    target = b"/v1/runs?q=" + CANARY * (size // len(CANARY))
    answer = exchange(served, [b"GET " + target + b" HTTP/1.1\r\nHost: charter\r\n\r\n"])
    doc = refused(answer, 414, "URL_TOO_LONG")
    assert doc["detail"] == "the request target (URL) is longer than 8192 bytes"
    still_serves(served)


def test_heads_within_the_bounds_are_served(served: Served) -> None:
    fields = b"".join(b"X-Ok-%d: v\r\n" % i for i in range(90))
    big = b"X-Big: " + b"a" * 8000 + b"\r\n"
    url = b"/healthz?q=" + b"a" * 8000
    answer = exchange(
        served,
        [b"GET " + url + b" HTTP/1.1\r\nHost: c\r\n", fields, big, b"Connection: close\r\n\r\n"],
    )
    assert answer.status == 200, answer.raw[:300]


def test_a_trickled_head_is_408_after_the_head_timeout(served: Served) -> None:
    started = time.monotonic()

    def trickle() -> Iterator[bytes]:
        yield HEAD
        for _ in range(40):  # 8 s at most: the server answers after its 2 s
            yield b"X-Flood: " + CANARY + b"\r\n"
            time.sleep(0.2)

    answer = exchange(served, trickle())
    took = time.monotonic() - started
    refused(answer, 408, "HEADERS_TIMEOUT")
    assert took < 6, took
    still_serves(served)


def test_a_connection_that_sends_nothing_is_closed_after_the_head_timeout(served: Served) -> None:
    with socket.create_connection(served.address, timeout=10) as sock:
        started = time.monotonic()
        assert sock.recv(100) == b""
        assert time.monotonic() - started < 6


def test_pipelined_and_kept_alive_requests_are_still_served(served: Served) -> None:
    """The head is counted per request: three requests in one write, the second with a body
    larger than a head may be, are each answered."""
    body = b'{"x": "' + b"a" * 40_000 + b'"}'
    parts = [
        b"GET /healthz HTTP/1.1\r\nHost: c\r\n\r\n"
        + b"POST /v1/runs HTTP/1.1\r\nHost: c\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
        + b"GET /healthz HTTP/1.1\r\nHost: c\r\nConnection: close\r\n\r\n"
    ]
    answer = exchange(served, parts)
    statuses = [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer.raw)]
    assert statuses == [200, 401, 200], answer.raw[:500]


def test_the_head_deadline_runs_from_its_first_byte(served: Served) -> None:
    """A connection opened ahead of its first request (a client's pool, a browser's
    preconnect) has the whole head timeout for that request's head."""

    def late_and_slow() -> Iterator[bytes]:
        time.sleep(1.4)  # idle, under the 2 s timeout
        for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: c\r\n", b"Connection: close\r\n"):
            yield piece
            time.sleep(0.4)  # the head ends 2.6 s after the connection, 1.2 s after its start
        yield b"\r\n"

    answer = exchange(served, late_and_slow())
    assert answer.status == 200, answer.raw[:300]


@pytest.mark.parametrize(
    "head",
    [
        HEAD + b"X Flood: " + CANARY + b"\r\n\r\n",  # a space in a field name
        b"GET /healthz HTTP/1.1\r\nHost: c\r\nX-Flood: " + CANARY + b"\x00\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01" + CANARY + b"\r\n\r\n",  # TLS spoken to plain HTTP
    ],
)
def test_a_malformed_request_is_a_400_problem(served: Served, head: bytes) -> None:
    refused(exchange(served, [head]), 400, "REQUEST_MALFORMED")
    still_serves(served)


def heads_refused(served: Served) -> dict[str, float]:
    text = httpx2.get(f"{served.url}/metrics", timeout=10).text
    found = re.findall(r'^charter_http_heads_refused_total\{reason="(\w+)"\} (\S+)$', text, re.M)
    return {reason: float(value) for reason, value in found}


def test_refused_heads_are_counted_in_metrics(served: Served) -> None:
    """An operator sees a flood of refused heads (they never reach the app, so the request
    counter cannot): ``charter_http_heads_refused_total`` by reason."""
    before = heads_refused(served)
    refused(exchange(served, one_huge_header(64 * 1024)), 431, "HEADERS_TOO_LARGE")
    refused(exchange(served, [HEAD + b"X Flood: x\r\n\r\n"]), 400, "REQUEST_MALFORMED")
    refused(exchange(served, [HEAD + b"X Flood: y\r\n\r\n"]), 400, "REQUEST_MALFORMED")
    after = heads_refused(served)
    assert after.get("HEADERS_TOO_LARGE", 0) - before.get("HEADERS_TOO_LARGE", 0) == 1
    assert after.get("REQUEST_MALFORMED", 0) - before.get("REQUEST_MALFORMED", 0) == 2
