"""A multipart upload the form parser refuses, over a real server on 127.0.0.1: the problem
says what is wrong with the form (it used to say the body was "not valid JSON")."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from charter.client import Client
from tests.server._harness import Project, ThreadServer


def _post(served: Project, server: ThreadServer, run_id: str, **kw: Any) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {served.keys['app']}", **kw.pop("headers", {})}
    return httpx2.post(f"{server.url}/v1/runs/{run_id}/artifacts", headers=headers, **kw)


def _problem(response: httpx2.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == "invalid_input"
    assert body["reason"] == "BODY_MALFORMED"
    assert "JSON" not in body["detail"]
    assert body["detail"].startswith("the multipart/form-data body is malformed")
    return body


def test_two_files_are_refused_as_more_than_one_file(
    served: Project, server: ThreadServer, clients: dict[str, Client]
) -> None:
    run_id = str(clients["app"].resolve_context("all")["run_id"])
    files = [("file", ("a.txt", b"a", "text/plain")), ("file", ("b.txt", b"b", "text/plain"))]
    body = _problem(_post(served, server, run_id, files=files))
    assert "more than one file" in body["detail"]
    assert clients["app"].list_artifacts(run_id) == []


@pytest.mark.parametrize(
    ("content_type", "why"),
    [
        ("multipart/form-data", "Missing boundary"),
        ("multipart/form-data; boundary=xyz", "Invalid multipart data"),
    ],
)
def test_a_body_that_is_not_a_form_says_what_is_wrong_with_the_form(
    served: Project,
    server: ThreadServer,
    clients: dict[str, Client],
    content_type: str,
    why: str,
) -> None:
    run_id = str(clients["app"].resolve_context("all")["run_id"])
    garbage = b"garbage \xff\xfe not a form"
    response = _post(
        served, server, run_id, headers={"Content-Type": content_type}, content=garbage
    )
    body = _problem(response)
    assert why in body["detail"]
    assert "garbage" not in response.text
