"""A single-valued query parameter given twice is refused, never "the last one wins".

Before, ``GET /v1/runs?limit=5&limit=500`` was answered with up to 500 runs (the framework
keeps the last repeat), so a check on the first value — the client's own, a proxy's — was not
the one the server applied. Now every single-valued query parameter of every route refuses a
repeat with ``422 QUERY_PARAM_REPEATED`` naming it (docs/server.md), before the route runs; the
console does the same, and the ``/mcp`` mount is untouched.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute

from charter.server.query import QueryRoute
from tests.server._harness import Project, ThreadServer
from tests.server.test_mcp_mount import mcp_client

DOCS = Path(__file__).parents[2] / "docs" / "server.md"


def _openapi() -> dict[str, Any]:
    from charter.server import create_app

    never: Any = None  # the document is built without opening a runtime
    return create_app(opener=lambda: never).openapi()


def _sample(schema: dict[str, Any]) -> str:
    for option in schema.get("anyOf", [schema]):
        if "enum" in option:
            return str(option["enum"][0])
        if option.get("type") == "integer":
            return str(max(1, int(option.get("minimum", 1))))
        if option.get("type") == "boolean":
            return "true"
    return "x"


def _single_valued() -> list[tuple[str, str, str, str]]:
    found = []
    for template, item in _openapi()["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "query" or parameter["schema"].get("type") == "array":
                    continue
                value = _sample(parameter["schema"])
                found.append((method.upper(), template, parameter["name"], value))
    return found


QUERY_PARAMS = _single_valued()


def test_the_api_has_query_parameters_to_check() -> None:
    names = {(t, n) for _, t, n, _ in QUERY_PARAMS}
    assert {("/v1/runs", "limit"), ("/v1/runs/{run_id}/events", "after")} <= names
    assert len(names) >= 8
    assert ("/v1/runs/{run_id}/artifacts", "name") in names  # an upload's, not only GETs


def _problem(answer: httpx2.Response, name: str) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    problem = answer.json()
    assert (problem["code"], problem["reason"]) == ("invalid_input", "QUERY_PARAM_REPEATED")
    assert f"the query parameter {name!r} appears more than once" in problem["detail"]
    assert problem["errors"] == [
        {
            "loc": ["query", name],
            "msg": "the parameter appears more than once",
            "type": "repeated_query_param",
        }
    ]


@pytest.mark.parametrize(("method", "template", "name", "value"), QUERY_PARAMS)
def test_every_single_valued_query_parameter_refuses_a_repeat(
    server: ThreadServer, project: Project, method: str, template: str, name: str, value: str
) -> None:
    path = re.sub(r"\{[^}]+\}", "nope", template)
    headers = {"Authorization": f"Bearer {project.keys['alice']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
        _problem(http.request(method, path, params=[(name, value), (name, value)]), name)
        # the same value once is not refused for it (whatever else the route answers)
        once = http.request(method, path, params=[(name, value)])
        assert "QUERY_PARAM_REPEATED" not in once.text
    # nor anonymously: the repeat is refused before the route (or its credential) runs
    anonymous = httpx2.request(method, server.url + path, params=[(name, value)] * 3, timeout=30)
    _problem(anonymous, name)


def test_a_second_limit_is_not_the_one_applied(server: ThreadServer, project: Project) -> None:
    headers = {"Authorization": f"Bearer {project.keys['app']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
        assert http.post("/v1/runs", json={}).status_code in (200, 201)
        assert http.post("/v1/runs", json={}).status_code in (200, 201)
        assert len(http.get("/v1/runs", params={"limit": 1}).json()) == 1
        _problem(http.get("/v1/runs?limit=1&limit=500"), "limit")
        _problem(http.get("/v1/runs?limit=1&lim%69t=500"), "limit")  # decoded names count
        head = http.head("/v1/runs?limit=1&limit=500")
        assert (head.status_code, head.content) == (422, b"")
        # a parameter the route does not take is ignored, repeated or not, as before
        assert http.get("/v1/runs?color=1&color=2").status_code == 200


def test_the_error_is_documented() -> None:
    text = DOCS.read_text()
    assert "422 `QUERY_PARAM_REPEATED`" in text
    assert 'errors: [{loc: ["query", "limit"], type: "repeated_query_param"' in text


def test_every_route_checks_its_query() -> None:
    """The API's routers and the console's: none has an APIRoute that skips the check."""
    import charter.server.console as console
    import charter.server.routes as api

    checked = []
    for package in (api, console):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            router = getattr(module, "router", None)
            if isinstance(router, APIRouter):
                checked += [r for r in router.routes if isinstance(r, APIRoute)]
    assert len(checked) > 40
    assert [r.path for r in checked if not isinstance(r, QueryRoute)] == []


def test_the_console_refuses_a_repeat_as_an_html_page(server: ThreadServer) -> None:
    answer = httpx2.get(f"{server.url}/console/runs/nope/stream?after=1&after=2", timeout=30)
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert "QUERY_PARAM_REPEATED" in answer.text
    assert "appears more than once" in answer.text
    login = httpx2.get(f"{server.url}/console/login?next=/a&next=/b", timeout=30)
    assert login.status_code == 422
    assert "QUERY_PARAM_REPEATED" in login.text


@pytest.mark.anyio
async def test_the_mcp_mount_is_not_affected(server: ThreadServer, project: Project) -> None:
    url = server.url + "/mcp/all?x=1&x=2"
    async with mcp_client(url, project.keys["app"]) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
    assert "kv_get" in tools
