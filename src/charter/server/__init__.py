"""The HTTP server: the ``/v1`` API, auth, SSE, health, readiness and metrics.

Needs the ``server`` extra (FastAPI, uvicorn, PyJWT). Start it with ``charter serve`` or build
the ASGI app with :func:`create_app`.
"""

from charter.server.app import create_app

__all__ = ["create_app"]
