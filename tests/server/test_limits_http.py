"""Limits over HTTP: a flood, or calls past a concurrency cap, answer 429 with Retry-After (the
envelope as the body), the refusals are counted on /metrics, and the Python client reads the
envelope back."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import pytest

from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import Project, ThreadServer, write_served_project

LIMITS = """
limits:
  rate:
    principal: {per_s: 0.01, burst: 3}
  concurrency:
    tools: {kv.slow: 1}
  pending_approvals: {tenant: 50, principal: 1}
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, ThreadServer]]:
    project = write_served_project(tmp_path_factory.mktemp("limited"))
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + LIMITS)
    root: Path = project.root

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        yield project, live


def test_a_flood_answers_429_with_retry_after(limited: tuple[Project, ThreadServer]) -> None:
    project, server = limited
    headers = {"Authorization": f"Bearer {project.keys['app']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
        ctx = http.post("/v1/contexts", json={"profile": "all"}).json()["context_id"]

        def call(i: int) -> httpx2.Response:
            body = {"tool": "kv.get", "call_id": f"h{i}", "arguments": {"key": "a"}}
            return http.post(f"/v1/contexts/{ctx}/calls", json=body)

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(call, range(12)))
        statuses = sorted(r.status_code for r in answers)
        assert statuses == [200] * 3 + [429] * 9
        throttled = [r for r in answers if r.status_code == 429]
        for r in throttled:
            assert int(r.headers["Retry-After"]) >= 1
            body = r.json()
            assert body["status"] == "denied"
            assert body["error"]["code"] == "resource_limit"
            assert body["error"]["reason"] == "RATE_LIMITED"
            assert body["error"]["retry_after"] > 0
        metrics = http.get("/metrics").text
    assert 'charter_limit_refusals_total{reason="RATE_LIMITED",tool="kv.get"} 9' in metrics


def test_the_client_reads_a_throttled_envelope(limited: tuple[Project, ThreadServer]) -> None:
    project, server = limited
    with Client(server.url, project.keys["alice"]) as client:
        ctx = client.resolve_context("all")["context_id"]
        answers = [client.call(ctx, "kv.get", f"c{i}", {"key": "a"}) for i in range(4)]
    assert [a.error["reason"] if a.error else None for a in answers] == [
        None,
        None,
        None,
        "RATE_LIMITED",
    ]


def test_the_pending_approval_cap_over_http(limited: tuple[Project, ThreadServer]) -> None:
    project, server = limited
    with Client(server.url, project.keys["gapp"]) as client:
        ctx = client.resolve_context("all")["context_id"]
        first = client.call(ctx, "kv.put", "w1", {"key": "a", "value": "1"})
        second = client.call(ctx, "kv.put", "w2", {"key": "b", "value": "2"})
    assert first.status.value == "pending_approval"
    assert second.error is not None
    assert second.error["reason"] == "TOO_MANY_PENDING_APPROVALS"
    with httpx2.Client(base_url=server.url, timeout=30) as http:
        metrics = http.get("/metrics").text
    assert 'reason="TOO_MANY_PENDING_APPROVALS",tool="kv.put"} 1' in metrics


def test_calls_past_a_concurrency_cap_answer_429(limited: tuple[Project, ThreadServer]) -> None:
    project, server = limited
    headers = {"Authorization": f"Bearer {project.keys['bob']}"}  # bob's 3 tokens are unused
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
        ctx = http.post("/v1/contexts", json={"profile": "all"}).json()["context_id"]

        def call(i: int) -> httpx2.Response:
            body = {"tool": "kv.slow", "call_id": f"s{i}", "arguments": {"seconds": 3.0}}
            return http.post(f"/v1/contexts/{ctx}/calls", json=body)

        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(call, range(3)))
        metrics = http.get("/metrics").text
    assert sorted(r.status_code for r in answers) == [200, 429, 429]
    for r in answers:
        if r.status_code == 429:
            assert r.headers["Retry-After"] == "1"
            assert r.json()["error"]["reason"] == "CONCURRENCY_LIMITED"
    assert 'charter_limit_refusals_total{reason="CONCURRENCY_LIMITED",tool="kv.slow"} 2' in metrics
