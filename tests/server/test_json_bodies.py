"""Every JSON body of the API, against a live server: a body that is not sent as JSON is
``415 UNSUPPORTED_MEDIA_TYPE``, and an object naming a member twice — anywhere in the body —
is ``400 BODY_MALFORMED`` with the member's path, not "the last one wins". Both before anything
is recorded, on every operation the OpenAPI document gives a JSON body, and documented there.

Before: a call's body sent as ``text/plain`` was read as JSON and executed (with no
Content-Type at all it still is: nothing claims it is something else); a decision
``{"reason": "a", "reason": "b"}`` was recorded with ``"b"``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from charter.client import Client
from charter.contracts.problem import json_type_refused
from tests.server._harness import Project, ThreadServer

CANARY = "body-canary-3c1f9e"  # never echoed back in a problem


def _http(server: ThreadServer, key: str) -> httpx2.Client:
    return httpx2.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def json_operations(server: ThreadServer) -> list[tuple[str, dict[str, Any]]]:
    """(path with its parameters filled in, operation) of every operation taking JSON."""
    doc = httpx2.get(f"{server.url}/openapi.json", timeout=30).json()
    found = []
    for template, item in doc["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            assert method == "post", template
            assert list(operation["requestBody"]["content"]) == ["application/json"], template
            path = template
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    path = path.replace("{" + parameter["name"] + "}", "nope")
            found.append((path, operation))
    return found


def test_every_json_body_operation_documents_the_body_problems(server: ThreadServer) -> None:
    operations = json_operations(server)
    assert len(operations) >= 13  # contexts, calls, approvals, runs, tasks, chat, proposals…
    for path, operation in operations:
        responses = operation["responses"]
        for status in ("400", "413", "415", "422"):
            assert "application/problem+json" in responses[status]["content"], (path, status)
        assert "Accept" in responses["415"]["headers"], path


@pytest.mark.parametrize(
    ("content_type", "named"),
    [
        ("text/plain", "'text/plain'"),
        ("text/plain; charset=utf-8", "'text/plain'"),
        ("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'"),
        ("multipart/form-data; boundary=x", "'multipart/form-data'"),
        ("application/jsonx", "'application/jsonx'"),
        ("application/json; charset=latin-1", "charset 'latin-1'"),
        (None, "no Content-Type"),
    ],
)
def test_a_body_not_sent_as_json_is_415_on_every_json_operation(
    server: ThreadServer, project: Project, content_type: str | None, named: str
) -> None:
    body = json.dumps({"profile": "all", "reason": CANARY}).encode()
    headers = {"content-type": content_type} if content_type else {}
    with _http(server, project.keys["alice"]) as http:
        for path, _ in json_operations(server):
            if content_type is None and path.endswith("/calls"):
                continue  # a call with no type claimed is read as JSON (the test below)
            answer = http.post(path, content=body, headers=headers)
            assert answer.status_code == 415, (path, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.headers["accept"] == "application/json"
            problem = answer.json()
            assert problem["reason"] == "UNSUPPORTED_MEDIA_TYPE"
            assert problem["code"] == "invalid_input"
            assert named in problem["detail"]
            assert CANARY not in answer.text


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_body_that_is_not_utf8_without_a_bom_is_400_on_every_json_operation(
    server: ThreadServer, project: Project, encoding: str
) -> None:
    """RFC 8259 §8.1: JSON between systems is UTF-8, without a byte order mark. The framework
    guessed the encoding (``POST /v1/contexts`` in UTF-16 made a context, 201) while a call's
    own parser refused it; now every JSON operation answers the same problem, before anything
    is recorded."""
    body = json.dumps({"profile": "reader", "reason": CANARY}).encode(encoding)
    json_type = {"content-type": "application/json"}
    with _http(server, project.keys["alice"]) as http:
        runs = len(http.get("/v1/runs", params={"limit": 1000}).json())
        problems = []
        for path, _ in json_operations(server):
            for headers in (json_type, {}) if path.endswith("/calls") else (json_type,):
                answer = http.post(path, content=body, headers=headers)
                assert answer.status_code == 400, (path, answer.text)
                assert answer.headers["content-type"] == "application/problem+json"
                assert CANARY not in answer.text
                problems.append(answer.json())
        assert len(http.get("/v1/runs", params={"limit": 1000}).json()) == runs
    assert problems[0] == {
        "type": "urn:charter:problem:BODY_MALFORMED",
        "title": "Bad Request",
        "status": 400,
        "detail": "the body is not UTF-8 JSON (RFC 8259: UTF-8, without a byte order mark)",
        "code": "invalid_input",
        "reason": "BODY_MALFORMED",
        "retryable": False,
    }
    assert all(problem == problems[0] for problem in problems)


def test_a_call_sent_as_text_is_refused_and_not_recorded(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    url = f"/v1/contexts/{ctx['context_id']}/calls"
    body = b'{"tool": "kv.echo", "call_id": "plain-1", "arguments": {"payload": {}}}'
    with _http(server, project.keys["app"]) as http:
        refused = http.post(url, content=body, headers={"content-type": "text/plain"})
        assert refused.status_code == 415
        assert http.get(f"/v1/calls/{ctx['context_id']}/plain-1").status_code == 404
        sent = http.post(url, content=body, headers={"content-type": "application/json"})
        assert sent.json()["status"] == "succeeded"


def test_a_call_with_no_content_type_is_read_as_json_and_checked_as_json(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """Raw ``httpx`` content and ``curl --data-binary`` claim no type: a call's body is
    then read as JSON, as it always was, and refused as any JSON body would be."""
    ctx = clients["app"].resolve_context("all")
    url = f"/v1/contexts/{ctx['context_id']}/calls"
    with _http(server, project.keys["app"]) as http:
        body = b'{"tool": "kv.echo", "call_id": "bare-1", "arguments": {"payload": {}}}'
        sent = http.post(url, content=body)
        assert "content-type" not in sent.request.headers
        assert sent.json()["status"] == "succeeded"
        twice = http.post(url, content=b'{"tool": "kv.echo", "tool": "kv.get", "call_id": "b2"}')
        assert twice.status_code == 400
        assert twice.json()["reason"] == "BODY_MALFORMED"
        assert http.post(url, content=b"not json").status_code == 400


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        'Application/JSON;charset="UTF-8"',
        "application/merge-patch+json",
        "application/vnd.example.v1+json; charset=utf-8",
    ],
)
def test_json_media_types_are_taken(
    server: ThreadServer, project: Project, clients: dict[str, Client], content_type: str
) -> None:
    ctx = clients["app"].resolve_context("all")
    headers = {"content-type": content_type}
    with _http(server, project.keys["app"]) as http:
        made = http.post("/v1/contexts", content=b'{"profile": "reader"}', headers=headers)
        assert made.status_code == 201, made.text
        call = b'{"tool": "kv.echo", "call_id": "mt", "arguments": {"payload": {}}}'
        answer = http.post(f"/v1/contexts/{ctx['context_id']}/calls", content=call, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "succeeded"


def test_an_empty_optional_body_needs_no_content_type(
    server: ThreadServer, project: Project
) -> None:
    with _http(server, project.keys["app"]) as http:
        made = http.post("/v1/runs")
        assert made.status_code == 201, made.text
        typed = http.post("/v1/runs", headers={"content-type": "text/plain"})
        assert typed.status_code == 201, typed.text  # nothing to read as anything


@pytest.mark.parametrize(
    ("body", "pointer", "loc"),
    [
        ('{"a": 1, "a": 2}', "/a", ["a"]),
        ('{"x": [{"k": 1}, {"k": 1, "k": 2}]}', "/x/1/k", ["x", 1, "k"]),
        ('{"x": {"a/b~c": {"q": 1, "q": 2}}}', "/x/a~1b~0c/q", ["x", "a/b~c", "q"]),
        ('{"x\\ud800": 1, "x\\ud800": 2}', "/x\\ud800", ["x\\ud800"]),
    ],
)
def test_a_repeated_member_is_400_naming_its_path_on_every_json_operation(
    server: ThreadServer, project: Project, body: str, pointer: str, loc: list[Any]
) -> None:
    with _http(server, project.keys["alice"]) as http:
        for path, _ in json_operations(server):
            answer = http.post(
                path, content=body.encode(), headers={"content-type": "application/json"}
            )
            assert answer.status_code == 400, (path, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            problem = answer.json()
            assert problem["reason"] == "BODY_MALFORMED"
            assert f"appears twice (at {pointer})" in problem["detail"], problem
            assert problem["errors"] == [
                {
                    "loc": ["body", *loc],
                    "msg": "the member appears twice",
                    "type": "repeated_member",
                }
            ]


def test_a_repeated_member_decides_nothing(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    pending = clients["app"].call(ctx["context_id"], "kv.put", "rep-1", {"key": "k", "value": "v"})
    assert pending.approval is not None
    approval = pending.approval["id"]
    json_type = {"content-type": "application/json"}
    with _http(server, project.keys["alice"]) as http:
        decided = http.post(
            f"/v1/approvals/{approval}/reject",
            content=b'{"reason": "looks fine", "reason": "reject it"}',
            headers=json_type,
        )
        assert decided.status_code == 400, decided.text
        assert http.get(f"/v1/approvals/{approval}").json()["status"] == "pending"
        runs = len(http.get("/v1/runs", params={"limit": 1000}).json())
        made = http.post(
            "/v1/contexts",
            content=b'{"profile": "reader", "profile": "all"}',
            headers=json_type,
        )
        assert made.status_code == 400
        ended = http.post(
            f"/v1/runs/{ctx['run_id']}/cancel",
            content=b'{"reason": "a", "reason": "b"}',
            headers=json_type,
        )
        assert ended.status_code == 400
        assert http.get(f"/v1/runs/{ctx['run_id']}").json()["status"] != "cancelled"
        assert len(http.get("/v1/runs", params={"limit": 1000}).json()) == runs
        approved = http.post(f"/v1/approvals/{approval}/approve", json={"reason": "once"})
        assert approved.json()["status"] == "approved"


def test_repeats_inside_a_calls_arguments_still_reach_the_kernel(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """The arguments' exact text is the kernel's to judge: a repeat there is the kernel's
    audited rejection (``ARGS_DUPLICATE_KEY``), not a 400 before the kernel sees it."""
    ctx = clients["app"].resolve_context("all")
    with _http(server, project.keys["app"]) as http:
        answer = http.post(
            f"/v1/contexts/{ctx['context_id']}/calls",
            content=b'{"tool": "kv.echo", "call_id": "dup-args", '
            b'"arguments": {"payload": {"a": 1, "a": 2}}}',
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["status"] == "rejected"
        assert answer.json()["error"]["reason"] == "ARGS_DUPLICATE_KEY"


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("deep", b"[" * 3000 + b"]" * 3000, "ARGS_TOO_DEEP"),
        ("digits", b"9" * 5000, "ARGS_INTEGER_OUT_OF_RANGE"),
        (
            "deep-string",
            b'[{"s": "a]}\\\\", "d": ' + b"[" * 3000 + b"]" * 3000 + b"}]",
            "ARGS_TOO_DEEP",
        ),
    ],
)
def test_arguments_python_cannot_decode_are_the_kernels_rejection_as_from_the_cli(
    server: ThreadServer,
    project: Project,
    clients: dict[str, Client],
    name: str,
    value: bytes,
    reason: str,
) -> None:
    """Valid JSON nested past the interpreter's recursion limit, or an integer of more than
    4300 digits, inside ``arguments``: the kernel's own recorded rejection (as ``charter call``
    and MCP answer it), not ``400 BODY_MALFORMED`` "the value of 'arguments' is not valid
    JSON"; elsewhere in a body, a 400 saying which (and a syntax error says where)."""
    ctx = clients["app"].resolve_context("all")
    with _http(server, project.keys["app"]) as http:
        calls = f"/v1/contexts/{ctx['context_id']}/calls"
        json_type = {"content-type": "application/json"}
        body = b'{"tool": "kv.echo", "call_id": "raw-' + name.encode() + b'", "arguments": '
        answer = http.post(calls, content=body + b'{"payload": ' + value + b"}}", headers=json_type)
        assert answer.status_code == 422, answer.text
        assert (answer.json()["status"], answer.json()["error"]["reason"]) == ("rejected", reason)
        other = http.post(calls, content=b'{"tool": ' + value + b"}", headers=json_type)
        assert other.status_code == 400, other.text
        what = "nests too deeply" if reason == "ARGS_TOO_DEEP" else "too many digits"
        assert what in other.json()["detail"]
        broken = http.post(calls, content=body + b'{"payload": [1,, 2]}}', headers=json_type)
        assert broken.status_code == 400, broken.text
        assert "(Expecting value: character " in broken.json()["detail"]


@pytest.mark.parametrize(
    ("value", "taken"),
    [
        ("application/json", True),
        ("application/problem+json", True),
        (" application/json ; charset = utf-8 ", True),
        ("application/json; foo=bar", True),
        ("application/+json", False),
        ("application/json+xml", False),
        ("text/json", False),
        ("application/json; charset=utf-16", False),
        ("", False),
    ],
)
def test_which_content_types_are_json(value: str, taken: bool) -> None:
    assert (json_type_refused(value) is None) is taken


# every operation taking a JSON body (the test below checks the list against the OpenAPI
# document, so a new one cannot be left out)
JSON_OPERATIONS = [
    "/v1/contexts",
    "/v1/contexts/nope/calls",
    "/v1/contexts/nope/disclosures",
    "/v1/approvals/nope/approve",
    "/v1/approvals/nope/reject",
    "/v1/runs",
    "/v1/runs/nope/cancel",
    "/v1/runs/nope/fail",
    "/v1/runs/nope/tasks/nope/nope",
    "/v1/runs/nope/tasks/nope/handoff",
    "/v1/chat",
    "/v1/proposals/nope/approve",
    "/v1/proposals/nope/reject",
    "/v1/proposals/nope/apply",
]
NOT_OBJECTS = [
    ("null", "null"),
    (" null\n", "null"),
    ("[]", "an array"),
    ('[{"reason": "x"}]', "an array"),
    ("3", "a number"),
    ("-1.5e3", "a number"),
    ('"x"', "a string"),
    ("true", "a boolean"),
    ("false", "a boolean"),
]


def test_the_list_of_json_operations_is_the_apis(server: ThreadServer) -> None:
    assert sorted(path for path, _ in json_operations(server)) == sorted(JSON_OPERATIONS)


@pytest.mark.parametrize("path", JSON_OPERATIONS)
def test_a_body_that_is_not_a_json_object_is_400_on_every_json_operation(
    server: ThreadServer, project: Project, path: str
) -> None:
    """Before: ``POST /v1/runs`` (and a decision) with the body ``null`` took it as "no body"
    and made a run (201); an array or a scalar was a 422 schema mismatch that did not say
    what was wrong. Now every JSON operation answers 400 ``BODY_MALFORMED`` naming what the
    body is, before anything is recorded; an empty optional body is still no body."""
    json_type = {"content-type": "application/json"}
    with _http(server, project.keys["alice"]) as http:
        runs = len(http.get("/v1/runs", params={"limit": 1000}).json())
        for body, kind in NOT_OBJECTS:
            answer = http.post(path, content=body.encode(), headers=json_type)
            assert answer.status_code == 400, (path, body, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            problem = answer.json()
            assert (problem["code"], problem["reason"]) == ("invalid_input", "BODY_MALFORMED")
            assert problem["detail"] == f"the body must be a JSON object, not {kind}", problem
        assert len(http.get("/v1/runs", params={"limit": 1000}).json()) == runs
