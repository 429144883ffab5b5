"""The HTTP server: the ``/v1`` API, auth, SSE, health, readiness and metrics.

Needs the ``server`` extra (FastAPI, uvicorn, PyJWT). Start it with ``charter serve`` or build
the ASGI app with :func:`create_app` and serve it with uvicorn, giving it
``http=head_limited_protocol(limits)`` for bounded request heads as ``charter serve`` does.
"""

from charter.server.app import create_app
from charter.server.http_protocol import head_limited_protocol

__all__ = ["create_app", "head_limited_protocol"]
