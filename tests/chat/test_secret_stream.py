"""A scripted model streams a known secret split across two text deltas: the stream redactor
holds the first half back, so neither the streamed events nor the stored conversation (its
events and its history) ever hold the secret or either half's join — on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.redaction import REDACTED, Redactor
from charter.providers import ScriptedProvider
from charter.stores.conversations import ConversationStore
from tests.chat.conftest import FakeClock
from tests.chat.test_durable import _replica, _turn, postgres_url, project, sqlite_url
from tests.server._harness import Project

pytestmark = pytest.mark.anyio

SECRET = "tok-Zq81-VERY-private-4471"
HALF = 11
SCRIPT = {
    "rules": [
        {
            "match": "",
            "steps": [
                {"say": f"Your key is {SECRET[:HALF]}"},
                {"say": f"{SECRET[HALF:]} — keep it safe."},
            ],
        }
    ]
}

__all__ = ["postgres_url", "project", "sqlite_url"]  # fixtures used by name


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_secret_split_across_two_deltas_is_never_streamed_or_stored(
    project: Project, backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{backend}_url")
    provider = ScriptedProvider.from_document(SCRIPT)
    async with _replica(project, url, FakeClock(), provider) as (rt, hub):
        rt.kernel.redactor = Redactor().remember([SECRET])
        conv, events = await _turn(hub, rt, "what is my key?")
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        record = await store.load_conversation(conv.conversation_id)
        stored = await store.read_conversation_events(conv.conversation_id, after=0)
    deltas = [e["data"]["text"] for e in events if e["type"] == "assistant.delta"]
    assert "".join(deltas) == f"Your key is {REDACTED} — keep it safe."
    streamed = json.dumps(events)
    assert SECRET not in streamed
    for piece in deltas:  # no delta ends with the secret's first half
        assert SECRET[:HALF] not in piece
    assert record is not None
    blobs: list[Any] = [record.history, *(e.data for e in stored)]
    for blob in blobs:
        text = blob if isinstance(blob, str) else json.dumps(blob)
        assert SECRET not in text
        assert SECRET[:HALF] not in text


def test_the_script_really_splits_the_secret(tmp_path: Path) -> None:
    halves = [step["say"] for step in SCRIPT["rules"][0]["steps"]]
    assert SECRET not in halves[0]
    assert SECRET not in halves[1]
    assert SECRET in "".join(halves)


ARG_SECRET = "sk-callarg-Vb93-private-0057"
ECHO_SCRIPT = {
    "rules": [
        {
            "match": "",
            "steps": [
                {"say": "Calling."},
                {
                    "call": {
                        "id": "e",
                        "tool": "kv_echo",
                        "arguments": {"payload": {"api_key": ARG_SECRET}},
                    }
                },
                {"say": f"I used the key {ARG_SECRET[:9]}"},
                {"say": f"{ARG_SECRET[9:]} and the call {{{{e.status}}}}."},
            ],
        }
    ]
}


async def test_the_models_text_after_a_call_is_scrubbed_of_the_calls_secret_arguments(
    project: Project, sqlite_url: str
) -> None:
    """The model passes a secret under a sensitive key (``api_key``) to a tool, then repeats it
    in its answer (split over two deltas): the secret is unknown to the deployment, but once
    a call of the turn took it, the rest of the turn's text — streamed, stored, and kept in
    the history — is scrubbed of it."""
    provider = ScriptedProvider.from_document(ECHO_SCRIPT)
    async with _replica(project, sqlite_url, FakeClock(), provider) as (rt, hub):
        conv, events = await _turn(hub, rt, "echo it")
        store = rt.kernel.store
        assert isinstance(store, ConversationStore)
        record = await store.load_conversation(conv.conversation_id)
        stored = await store.read_conversation_events(conv.conversation_id, after=0)
    [result] = [e for e in events if e["type"] == "tool.result"]
    assert result["data"]["status"] == "succeeded", result
    deltas = "".join(e["data"]["text"] for e in events if e["type"] == "assistant.delta")
    assert deltas.endswith(f"I used the key {REDACTED} and the call succeeded."), deltas
    assert ARG_SECRET not in json.dumps(events)
    assert record is not None
    for blob in [record.history, *(e.data for e in stored)]:
        text = blob if isinstance(blob, str) else json.dumps(blob)
        assert ARG_SECRET not in text
        assert ARG_SECRET[9:] not in text
