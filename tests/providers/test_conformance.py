"""One conformance suite for every provider: the scripted model, and the OpenAI-compatible
and Anthropic adapters running the official SDKs against a replay server on loopback that
serves recorded wire-format responses (``recordings/``). Each scenario — text, one tool call,
parallel tool calls, a tool error, a provider error — must give the same stream of Charter
events through the orchestrator and the governed kernel."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from charter.proposals import ProposalService
from charter.providers import ChatRequest, Orchestrator, ScriptedProvider
from charter.providers.anthropic import AnthropicProvider
from charter.providers.base import Provider
from charter.providers.events import SAFE_ERROR_MESSAGE
from charter.providers.openai_compat import OpenAICompatProvider
from charter.runtime import open_runtime
from tests.server._harness import ThreadServer, write_served_project

# tool.started describes the arguments by their shape, never their values (docs/privacy.md)
ECHO_SHAPE = {"fields": {"/payload/n": "integer"}, "bytes": 19}

RECORDINGS = Path(__file__).parent / "recordings"
SECRET = "sk-test-do-not-log-0123456789abcdef"
SCENARIOS = ("text", "one_tool", "parallel", "tool_error", "provider_error")
SCRIPT = {
    "text": [{"say": "Hello there."}],
    "one_tool": [
        {"call": {"id": "c1", "tool": "kv_echo", "arguments": {"payload": {"n": 1}}}},
        {"say": "Done."},
    ],
    "parallel": [
        {
            "calls": [
                {"id": "a", "tool": "kv_echo", "arguments": {"payload": {"n": 1}}},
                {"id": "b", "tool": "kv_echo", "arguments": {"payload": {"n": 2}}},
            ]
        },
        {"say": "Both done."},
    ],
    "tool_error": [
        {"call": {"id": "x", "tool": "kv_boom", "arguments": {"message": "bad"}}},
        {"say": "It failed."},
    ],
    "provider_error": [{"error": "upstream"}],
}
EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    "text": [
        ("started",),
        ("text", "Hello there."),
        ("said", "Hello there."),
        ("done", "completed"),
    ],
    "one_tool": [
        ("started",),
        ("tool.started", "kv_echo", ECHO_SHAPE),
        ("tool.result", "kv_echo", "succeeded"),
        ("text", "Done."),
        ("said", "Done."),
        ("done", "completed"),
    ],
    "parallel": [
        ("started",),
        ("tool.started", "kv_echo", ECHO_SHAPE),
        ("tool.result", "kv_echo", "succeeded"),
        ("tool.started", "kv_echo", ECHO_SHAPE),
        ("tool.result", "kv_echo", "succeeded"),
        ("text", "Both done."),
        ("said", "Both done."),
        ("done", "completed"),
    ],
    "tool_error": [
        ("started",),
        ("tool.started", "kv_boom", {"fields": {"/message": "string:3"}, "bytes": 17}),
        ("tool.result", "kv_boom", "failed"),
        ("text", "It failed."),
        ("said", "It failed."),
        ("done", "completed"),
    ],
    "provider_error": [("started",), ("error", SAFE_ERROR_MESSAGE), ("done", "failed")],
}


@dataclass
class Replay:
    """Serves ``recordings/<provider>/<scenario>.<round>`` in order; keeps the requests."""

    provider: str = ""
    scenario: str = ""
    round: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def reset(self, provider: str, scenario: str) -> None:
        self.provider, self.scenario, self.round = provider, scenario, 0
        self.requests.clear()
        self.headers.clear()

    async def answer(self, request: Request) -> Response:
        self.requests.append(json.loads(await request.body()))
        self.headers.append(dict(request.headers))
        self.round += 1
        base = RECORDINGS / self.provider / f"{self.scenario}.{self.round}"
        error = base.parent / f"{base.name}.json"
        if error.exists():
            doc = json.loads(error.read_text())
            return JSONResponse(doc["body"], status_code=doc["status"])
        body = (base.parent / f"{base.name}.sse").read_bytes()
        return StreamingResponse(iter([body]), media_type="text/event-stream")


@pytest.fixture(scope="module")
def replay() -> Iterator[tuple[Replay, str]]:
    state = Replay()
    app = FastAPI()
    app.add_api_route("/v1/chat/completions", state.answer, methods=["POST"])
    app.add_api_route("/v1/messages", state.answer, methods=["POST"])
    with ThreadServer(app) as live:
        yield state, live.url


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("providers")
    write_served_project(root)
    return root


def normalize(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        kind, data = e["type"], e["data"]
        if kind == "conversation.started":
            out.append(("started",))
        elif kind == "assistant.delta":
            if out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + data["text"])
            else:
                out.append(("text", data["text"]))
        elif kind == "assistant.completed":
            out.append(("said", data["text"]))
        elif kind == "tool.started":
            out.append(("tool.started", data["tool"], data["arguments"]))
        elif kind == "tool.result":
            out.append(("tool.result", data["tool"], data["status"]))
        elif kind == "conversation.error":
            out.append(("error", data["message"]))
        elif kind == "conversation.completed":
            out.append(("done", data["status"]))
    return out


def make_provider(kind: str, scenario: str, url: str) -> Provider:
    if kind == "scripted":
        return ScriptedProvider([{"match": "", "steps": SCRIPT[scenario]}])
    if kind == "openai":
        return OpenAICompatProvider(
            model="recorded-model", base_url=f"{url}/v1", api_key_env="CHARTER_TEST_KEY"
        )
    return AnthropicProvider(model="recorded-model", base_url=url, api_key_env="CHARTER_TEST_KEY")


async def run_turn(project: Path, provider: Provider, message: str = "go") -> list[dict[str, Any]]:
    async with open_runtime(project, store="memory:") as rt:
        orch = Orchestrator(rt, provider=provider, proposals=ProposalService(rt))
        request = ChatRequest(
            conversation_id="conv-1", principal=rt.principal("app"), message=message, profile="all"
        )
        return [e.to_dict() async for e in orch.execute_chat(request)]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("kind", ["scripted", "openai", "anthropic"])
def test_conformance(
    kind: str,
    scenario: str,
    project: Path,
    replay: tuple[Replay, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    state, url = replay
    state.reset(kind, scenario)
    monkeypatch.setenv("CHARTER_TEST_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    events = asyncio.run(run_turn(project, make_provider(kind, scenario, url)))
    assert normalize(events) == EXPECTED[scenario]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["data"]["provider"] == kind
    assert SECRET not in json.dumps(events)
    assert SECRET not in caplog.text
    if kind == "scripted":
        return
    # the credential went to the provider, by reference, and nowhere else
    assert all(any(SECRET in v for v in h.values()) for h in state.headers)
    rounds = 1 if scenario in ("text", "provider_error") else 2
    assert len(state.requests) == rounds
    if rounds == 2:  # Charter's continuation loop sent every tool result back
        sent = json.dumps(state.requests[1]["messages"])
        results = (
            [m for m in state.requests[1]["messages"] if m["role"] == "tool"]
            if kind == "openai"
            else [
                b
                for m in state.requests[1]["messages"]
                if isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") == "tool_result"
            ]
        )
        assert len(results) == (2 if scenario == "parallel" else 1)
        assert ("failed" in sent) == (scenario == "tool_error")
        if kind == "anthropic":
            assert [b["is_error"] for b in results] == [scenario == "tool_error"] * len(results)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_missing_credential_is_a_safe_error(
    kind: str, project: Path, replay: tuple[Replay, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = replay
    state.reset(kind, "text")
    monkeypatch.delenv("CHARTER_TEST_KEY", raising=False)
    events = asyncio.run(run_turn(project, make_provider(kind, "text", url)))
    assert normalize(events) == EXPECTED["provider_error"]
    assert state.requests == []


def test_repr_never_shows_the_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARTER_TEST_KEY", SECRET)
    for provider in (
        OpenAICompatProvider(model="m", api_key_env="CHARTER_TEST_KEY"),
        AnthropicProvider(model="m", api_key_env="CHARTER_TEST_KEY"),
    ):
        assert SECRET not in repr(provider)
        assert SECRET not in repr(vars(provider) if hasattr(provider, "__dict__") else provider)
