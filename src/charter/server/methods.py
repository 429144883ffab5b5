"""The ``Allow`` header of a ``405``: every method the request's path serves.

Starlette answers a method a path does not take with the ``Allow`` of the *first* route whose
path matched, so a path served by two routes (``GET /v1/runs`` and ``POST /v1/runs``) listed
only one of them. RFC 9110 §15.5.6: ``Allow`` lists the methods the target resource supports
— all of them, and ``HEAD`` wherever ``GET`` is (the server answers ``HEAD`` on every ``GET``
endpoint, :mod:`charter.server.middleware`).
"""

from __future__ import annotations

from starlette.routing import Match
from starlette.types import ASGIApp, Scope

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(app: ASGIApp, scope: Scope) -> str | None:
    """``Allow`` for the request's path: each method some route of ``app`` fully matches the
    path with (asked through the routes' own ``matches``, so included routers count too), in
    a fixed order; ``None`` when there is none (the path is not this router's)."""
    routes = getattr(getattr(app, "router", None), "routes", ())
    methods = {
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    }
    if not methods:
        return None
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(m for m in _ORDER if m in methods)
