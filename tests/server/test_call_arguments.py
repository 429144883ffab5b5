"""A call's ``arguments`` member that is there is never taken for an absent one: ``null`` is
not an arguments object (``ARGS_NOT_OBJECT``, rejected by the kernel as ``"arguments_json":
"null"`` always was), and naming both ``arguments`` and ``arguments_json`` — one of them null
included — is the "not both" refusal. Before, ``"arguments": null`` ran the tool with ``{}``
and ``"arguments": null, "arguments_json": "…"`` ran it with the second."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from charter.client import Client
from tests.server._harness import Project, ThreadServer

VALID = {"payload": {"n": 1}}


@pytest.mark.parametrize(
    "members",
    [{"arguments": None}, {"arguments_json": None}, {"arguments_json": "null"}],
    ids=["arguments-null", "arguments_json-null", "arguments_json-text-null"],
)
def test_null_arguments_are_not_an_object(
    server: ThreadServer, project: Project, clients: dict[str, Client], members: dict[str, Any]
) -> None:
    ctx = clients["app"].resolve_context("reader")
    url = f"{server.url}/v1/contexts/{ctx['context_id']}/calls"
    auth = {"Authorization": f"Bearer {project.keys['app']}"}
    body = {"tool": "kv.echo", "call_id": "aj6", **members}
    answer = httpx2.post(url, json=body, headers=auth, timeout=30)
    assert answer.status_code == 422, answer.text
    envelope = answer.json()
    assert envelope["status"] == "rejected"
    assert (envelope["error"]["code"], envelope["error"]["reason"]) == (
        "invalid_input",
        "ARGS_NOT_OBJECT",
    )
    assert "arguments" in envelope["error"]["message"]
    # rejected before any intent: the call id is still free for a real call
    real = {"tool": "kv.echo", "call_id": "aj6", "arguments": VALID}
    again = httpx2.post(url, json=real, headers=auth, timeout=30)
    assert (again.status_code, again.json()["status"]) == (200, "succeeded"), again.text


@pytest.mark.parametrize(
    "members",
    [
        {"arguments": None, "arguments_json": '{"payload": {}}'},
        {"arguments": VALID, "arguments_json": None},
        {"arguments": None, "arguments_json": None},
        {"arguments": VALID, "arguments_json": '{"payload": {}}'},
    ],
    ids=["arguments-null", "arguments_json-null", "both-null", "both-given"],
)
def test_both_members_are_refused_even_when_one_is_null(
    server: ThreadServer, project: Project, clients: dict[str, Client], members: dict[str, Any]
) -> None:
    ctx = clients["app"].resolve_context("reader")
    url = f"{server.url}/v1/contexts/{ctx['context_id']}/calls"
    auth = {"Authorization": f"Bearer {project.keys['app']}"}
    body = {"tool": "kv.echo", "call_id": "both", **members}
    answer = httpx2.post(url, json=body, headers=auth, timeout=30)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert (problem["reason"], problem["detail"]) == (
        "REQUEST_INVALID",
        "give arguments or arguments_json, not both",
    )
    # nothing was recorded: the call id has no row
    row = httpx2.get(f"{server.url}/v1/calls/{ctx['context_id']}/both", headers=auth, timeout=30)
    assert (row.status_code, row.json()["reason"]) == (404, "CALL_NOT_FOUND")


def test_the_documented_call_body_says_the_arguments_are_never_null(server: ThreadServer) -> None:
    doc = httpx2.get(f"{server.url}/openapi.json", timeout=30).json()
    props = doc["components"]["schemas"]["CallRequest"]["properties"]
    assert props["arguments"]["type"] == "object"
    assert props["arguments_json"]["type"] == "string"
    assert "anyOf" not in props["arguments"]
    assert "anyOf" not in props["arguments_json"]
