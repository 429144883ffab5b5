"""``GET /v1/chat/agents`` over a real server on loopback, raw and through both Python
clients: the agents a caller may chat with and the server's defaults (``chat.agent``,
``chat.profile``), for an authenticated caller only, and the same for every tenant — agents
belong to the Build, and nothing of a tenant (its conversations, runs) is in the answer.

Before, nothing said which agents a server had: ``charter chat --server`` learnt that an agent
was unknown from the first turn's ``conversation.error``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from charter.client import AsyncClient, Client
from charter.project.init import init_project
from tests.chat.conftest import Live, serve

COPILOT = {"name": "copilot", "description": "Helps design workflows; proposes, never mutates."}


@pytest.fixture(scope="module")
def defaulted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The workflow-copilot example whose deployment names a default agent and profile."""
    root = tmp_path_factory.mktemp("defaulted")
    init_project(root, template="workflow-copilot")
    deploy = root / "charter.deploy.yaml"
    text = deploy.read_text()
    assert "  grace_s: 300\n" in text
    deploy.write_text(
        text.replace("  grace_s: 300\n", "  grace_s: 300\n  agent: copilot\n  profile: copilot\n")
    )
    secrets = root / ".charter" / "secrets"
    keys = {n: (secrets / f"{n}.key").read_text().strip() for n in ("alice", "app", "intruder")}
    yield from serve(root, keys)


def test_every_caller_gets_the_builds_agents_and_no_default(copilot: Live) -> None:
    with Client(copilot.url, copilot.keys["app"]) as app:
        events = list(app.chat("hello", agent="copilot"))  # acme has a conversation now
        assert events[-1]["type"] == "conversation.completed"
    answers = {}
    for name in ("app", "alice", "intruder"):  # acme's application and operator, globex's
        with Client(copilot.url, copilot.keys[name]) as cl:
            answers[name] = cl.chat_agents()
    expected = {"agents": [COPILOT], "defaultAgent": None, "defaultProfile": None}
    assert answers == {"app": expected, "alice": expected, "intruder": expected}


def test_the_servers_defaults_are_named(defaulted: Live) -> None:
    with Client(defaulted.url, defaulted.keys["intruder"]) as cl:
        assert cl.chat_agents() == {
            "agents": [COPILOT],
            "defaultAgent": "copilot",
            "defaultProfile": "copilot",
        }


def test_a_build_without_agents(kv: Live) -> None:
    async def read() -> dict[str, Any]:
        async with AsyncClient(kv.url, kv.keys["gapp"]) as cl:
            return await cl.chat_agents()

    assert asyncio.run(read()) == {"agents": [], "defaultAgent": None, "defaultProfile": "all"}


@pytest.mark.parametrize(
    ("header", "reason"), [(None, "AUTH_MISSING"), ("Bearer not-a-key", "AUTH_INVALID")]
)
def test_authentication_is_required(copilot: Live, header: str | None, reason: str) -> None:
    with httpx2.Client(base_url=copilot.url, timeout=30) as http:
        answer = http.get("/v1/chat/agents", headers={"Authorization": header} if header else {})
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert answer.json()["reason"] == reason
    assert "copilot" not in answer.text


def test_read_only_and_documented(copilot: Live) -> None:
    headers = {"Authorization": f"Bearer {copilot.keys['app']}"}
    with httpx2.Client(base_url=copilot.url, timeout=30) as http:
        posted = http.post("/v1/chat/agents", json={}, headers=headers)
        assert posted.status_code == 405, posted.text
        spec = http.get("/openapi.json").json()
    operation = spec["paths"]["/v1/chat/agents"]["get"]
    assert operation["tags"] == ["chat"]
    assert {"200", "401"} <= set(operation["responses"])
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(schema["properties"]) == {"agents", "defaultAgent", "defaultProfile"}
