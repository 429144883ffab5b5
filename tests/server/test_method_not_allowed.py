"""A method a path does not take is 405 ``METHOD_NOT_ALLOWED`` whose ``Allow`` lists every
method the path serves — each route's, and ``HEAD`` wherever ``GET`` is (RFC 9110 §15.5.6).
Before, ``Allow`` named only the first route that matched the path: ``DELETE /v1/runs`` said
``Allow: POST`` though ``GET`` (and ``HEAD``) answer there too."""

from __future__ import annotations

import re

import httpx2

from tests.server._harness import Project, ThreadServer

_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def _served(doc: dict[str, dict[str, object]], path: str) -> set[str]:
    """The methods the OpenAPI document gives every template matching ``path``, with HEAD."""
    methods: set[str] = set()
    for template, item in doc.items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            methods |= {m.upper() for m in item}
    return methods | ({"HEAD"} if "GET" in methods else set())


def test_allow_lists_every_method_of_the_path(server: ThreadServer, project: Project) -> None:
    doc = httpx2.get(f"{server.url}/openapi.json", timeout=30).json()["paths"]
    headers = {"Authorization": f"Bearer {project.keys['app']}"}
    checked = 0
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
        for template in doc:
            path = re.sub(r"\{[^}]+\}", "nope", template)
            served = _served(doc, path)
            for method in ("DELETE", "PUT", "PATCH"):
                if method in served:
                    continue
                answer = http.request(method, path)
                assert answer.status_code == 405, (method, path, answer.text)
                assert answer.json()["reason"] == "METHOD_NOT_ALLOWED"
                allow = [m.strip() for m in answer.headers["allow"].split(",")]
                assert set(allow) == served, (method, path, allow)
                assert allow == sorted(allow, key=_ORDER.index), allow
                checked += 1
        assert checked >= 20
        runs = http.delete("/v1/runs")
        assert runs.headers["allow"] == "GET, HEAD, POST"
        assert http.head("/v1/runs").status_code == 200  # what Allow says is served, is
        contexts = http.head("/v1/contexts")  # POST only: HEAD is refused, and not listed
        assert (contexts.status_code, contexts.headers["allow"]) == (405, "POST")
