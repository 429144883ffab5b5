"""Two ``charter serve`` processes on one PostgreSQL database share one rate limit: a flood
from one principal spread over both is cut at the principal's burst in all, with 429 and
Retry-After from either replica, while another principal's calls pass."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from charter.client import AsyncClient, Client
from tests.server._harness import Project, spawn_serve, write_served_project
from tests.stores.conftest import create_database, drop_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LIMITS = """
limits:
  rate:
    principal: {per_s: 0.01, burst: 5}
"""


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, str, str]]:
    project = write_served_project(tmp_path_factory.mktemp("limited-replicas"))
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + LIMITS)
    name = create_database()
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        with spawn_serve(project.root, url) as a, spawn_serve(project.root, url) as b:
            yield project, a, b
    finally:
        drop_database(name)


def test_a_flood_over_two_replicas_is_cut_at_one_limit(
    replicas: tuple[Project, str, str],
) -> None:
    project, a, b = replicas
    key = project.keys["app"]
    with Client(a, key) as cl:
        ctx = cl.resolve_context("all")["context_id"]
    answers: list[tuple[str, Any]] = []

    async def one(i: int, url: str) -> None:
        async with AsyncClient(url, key) as client:
            env = await client.call(ctx, "kv.get", f"f{i}", {"key": "x"})
            answers.append((url, env))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(one, i, a if i % 2 else b)

    anyio.run(main)
    admitted = [url for url, env in answers if env.error is None]
    refused = [env for _, env in answers if env.error is not None]
    assert len(admitted) == 5
    assert len(refused) == 35
    assert {env.error["reason"] for env in refused} == {"RATE_LIMITED"}
    assert all(env.error["retry_after"] > 0 for env in refused)
    with Client(b, project.keys["alice"]) as alice:  # another principal, same tenant
        other = alice.resolve_context("all")["context_id"]
        assert alice.call(other, "kv.get", "o1", {"key": "x"}).error is None
