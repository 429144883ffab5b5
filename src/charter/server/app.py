"""The FastAPI application over a runtime: ``create_app(runtime) -> FastAPI``.

Routes live one resource per module under :mod:`charter.server.routes` and reach the
runtime through :class:`~charter.server.state.ServerState` (``app.state.charter``). Errors
are problem+json (:mod:`charter.server.problems`); one pure ASGI middleware adds trace ids,
the body size limit, access logs and request metrics. ``/docs`` serves Swagger UI from the
assets vendored in ``static/swagger`` (no CDN), ``/openapi.json`` the OpenAPI 3.1 document.

Other ASGI apps (the MCP server at ``/mcp/{profile}``, a console) mount beside ``/v1`` with
``create_app(runtime, mounts={"/mcp": mcp_app})`` or ``app.mount(...)`` afterwards; they share
``app.state.charter`` (the runtime, the authenticator) when they need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from charter import telemetry
from charter._version import __version__
from charter.errors import CharterError, ErrorCode, Failure, UserError
from charter.kernel.redaction import Redactor
from charter.ledger.chain import LedgerKey
from charter.runtime import Runtime
from charter.server.auth import APPROVAL_TOKEN_HEADER, Authenticator
from charter.server.body import RepeatedMember
from charter.server.console import create_console
from charter.server.jwt_config import JwtConfig, load_jwt_config
from charter.server.logs import log
from charter.server.mcp_mount import McpMount
from charter.server.methods import allowed_methods
from charter.server.metrics import ServerMetrics
from charter.server.middleware import ServerMiddleware
from charter.server.problems import Problem, failure_response, problem_response
from charter.server.query import RepeatedQueryParam
from charter.server.routes import (
    approvals,
    artifacts,
    calls,
    chat,
    contexts,
    disclosures,
    ops,
    runs,
    tasks,
)
from charter.server.routes import proposals as proposal_routes
from charter.server.schemas import CallRequest
from charter.server.state import ReadinessCheck, ServerState
from charter.server.streams import StreamSlots

STATIC = Path(__file__).parent / "static"
SWAGGER = "/static/swagger"
_AUTO = object()
_PUBLIC = frozenset({"/healthz", "/readyz", "/metrics"})
_DECISIONS = ("/v1/approvals/{approval_id}/approve", "/v1/approvals/{approval_id}/reject")

RuntimeOpener = Callable[[], AbstractAsyncContextManager[Runtime]]


def make_state(
    runtime: Runtime,
    *,
    jwt_config: JwtConfig | object | None = _AUTO,
    readiness: Sequence[ReadinessCheck] = (),
    max_body_bytes: int | None = None,
    sse_keepalive_s: float = 15.0,
    body_timeout_s: float = 30.0,
) -> ServerState:
    config = load_jwt_config(runtime.deployment) if jwt_config is _AUTO else jwt_config
    assert config is None or isinstance(config, JwtConfig)
    key = getattr(runtime.store, "key", None)
    limit = max_body_bytes or runtime.deployment.limits.max_args_bytes + 64 * 1024
    metrics = ServerMetrics()
    return ServerState(
        runtime=runtime,
        metrics=metrics,
        streams=StreamSlots(runtime.deployment.limits.streams, metrics),
        authenticator=Authenticator(runtime.deployment, config),
        ledger_key=key if isinstance(key, LedgerKey) else None,
        readiness=tuple(readiness),
        max_body_bytes=limit,
        sse_keepalive_s=sse_keepalive_s,
        body_timeout_s=body_timeout_s,
    )


def create_app(
    runtime: Runtime | None = None,
    *,
    opener: RuntimeOpener | None = None,
    jwt_config: JwtConfig | object | None = _AUTO,
    readiness: Sequence[ReadinessCheck] = (),
    mounts: Mapping[str, ASGIApp] | None = None,
    max_body_bytes: int | None = None,
    sse_keepalive_s: float = 15.0,
    maintain_s: float | None = 15.0,
    body_timeout_s: float = 30.0,
) -> FastAPI:
    """The HTTP API over ``runtime`` — or over the runtime ``opener`` opens at start-up
    (``charter serve`` does that, so the store's pool lives on the server's event loop).

    ``jwt_config`` defaults to the deployment file's ``jwt:`` section; ``readiness`` adds
    checks to ``/readyz``; ``mounts`` maps path prefixes to other ASGI apps; a JSON body
    that has not arrived whole after ``body_timeout_s`` is ``408 BODY_TIMEOUT``. Every
    ``maintain_s`` seconds (None: never) the server runs its upkeep
    (``Runtime.operations.maintain``): calls of processes whose lease lapsed become
    ``unknown``, approvals past their lifetime ``expired``, idle session runs end.
    """
    if (runtime is None) == (opener is None):
        raise TypeError("give exactly one of runtime or opener")
    options: dict[str, Any] = {
        "jwt_config": jwt_config,
        "readiness": readiness,
        "max_body_bytes": max_body_bytes,
        "sse_keepalive_s": sse_keepalive_s,
        "body_timeout_s": body_timeout_s,
    }

    mcp_mount = McpMount()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if opener is None:
            async with (
                mcp_mount.starting(app.state.charter),
                _phases(app.state.charter),
                _upkeep(app, maintain_s),
            ):
                yield
            return
        async with opener() as opened:
            app.state.charter = make_state(opened, **options)
            async with (
                mcp_mount.starting(app.state.charter),
                _phases(app.state.charter),
                _upkeep(app, maintain_s),
                _drained(app.state.charter),
            ):
                log(logging.INFO, "ready", environment=opened.deployment.environment)
                yield

    app = FastAPI(
        title="Charter",
        version=__version__,
        summary="A governed tool-execution runtime for AI agents.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.charter = make_state(runtime, **options) if runtime is not None else None
    # tasks before runs: its fixed paths (…/start) come before runs' …/{action}
    for module in (contexts, calls, approvals, tasks, runs, chat, disclosures):
        app.include_router(module.router, prefix="/v1")
    app.include_router(proposal_routes.router, prefix="/v1")
    app.include_router(artifacts.router, prefix="/v1")
    app.include_router(ops.router)
    app.mount(SWAGGER, StaticFiles(directory=STATIC / "swagger"), name="swagger")
    for prefix, sub in (mounts or {}).items():
        app.mount(prefix, sub)
    app.mount("/mcp", mcp_mount)
    app.mount("/console", create_console(lambda: app.state.charter))
    _handlers(app)
    _index(app)
    _docs(app)
    app.add_middleware(ServerMiddleware, state_of=lambda: app.state.charter)
    return app


DRAIN_S = 3.0
"""How long a stopping server waits for the requests still being served before it closes the
runtime: the ones its HTTP server cancelled at the end of the grace period record how their
calls ended and answer with it (routes/calls.py) in milliseconds."""


@asynccontextmanager
async def _drained(state: ServerState) -> AsyncIterator[None]:
    """On the way out, wait (at most :data:`DRAIN_S`) for the requests in flight to be
    answered, so that none loses its answer — or its call its record — to the runtime
    closing under it."""
    try:
        yield
    finally:
        deadline = time.monotonic() + DRAIN_S
        while state.requests > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


@asynccontextmanager
async def _phases(state: ServerState) -> AsyncIterator[None]:
    """Feed the call path's phase timings into this server's ``charter_call_phase_seconds``
    while it runs."""
    remove = telemetry.on_phase(state.metrics.record_phase)
    try:
        yield
    finally:
        remove()


def _redactor(request: Request) -> Redactor:
    """The deployment's redactor (a plain one before the server has started)."""
    state = getattr(request.app.state, "charter", None)
    return state.runtime.redactor if state is not None else Redactor()


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(Failure)
    async def on_failure(request: Request, exc: Failure) -> JSONResponse:
        # A message may quote what the client sent (an unknown member, profile or workflow
        # name): a known secret in it is not sent back.
        return failure_response(exc, redactor=_redactor(request))

    @app.exception_handler(RepeatedMember)
    @app.exception_handler(RepeatedQueryParam)
    async def on_repeated(
        request: Request, exc: RepeatedMember | RepeatedQueryParam
    ) -> JSONResponse:
        redactor = _redactor(request)
        return problem_response(
            code=exc.code,
            reason=exc.reason,
            detail=redactor.redact_text(exc.message),
            errors=redactor.redact(exc.errors()),
        )

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]  # never the offending input: it may hold a secret
        if any(e["type"] == "json_invalid" for e in errors):
            return problem_response(
                code=ErrorCode.INVALID_INPUT,
                reason="BODY_MALFORMED",
                detail="the body is not valid JSON",
            )
        return problem_response(
            code=ErrorCode.INVALID_INPUT,
            reason="REQUEST_INVALID",
            detail="the request does not match the API's schema",
            errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # every method the path serves, not its first route's
            allow = allowed_methods(request.app, request.scope)
            headers = {**(headers or {}), **({"Allow": allow} if allow else {})}
        reason = {400: "BODY_MALFORMED", 404: "ROUTE_NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(
            exc.status_code, "REQUEST_INVALID"
        )
        detail = _redactor(request).redact_text(str(exc.detail))
        if exc.status_code == 400:  # the framework could not read the body at all
            detail = "the body is not valid JSON (not UTF-8, or nested too deeply)"
        return problem_response(
            code=ErrorCode.INVALID_INPUT,
            reason=reason,
            detail=detail,
            status=exc.status_code,
            headers=headers,
        )

    @app.exception_handler(UserError)
    async def on_user_error(request: Request, exc: UserError) -> JSONResponse:
        log(logging.ERROR, "configuration error", error=str(exc))
        return problem_response(
            code=ErrorCode.INTERNAL,
            reason="SERVER_MISCONFIGURED",
            detail="the server's configuration is incomplete; see its log",
        )

    @app.exception_handler(Exception)
    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        log(logging.ERROR, "unhandled error", error_type=type(exc).__name__)
        return problem_response(code=ErrorCode.INTERNAL, reason="INTERNAL", detail="internal error")


def _index(app: FastAPI) -> None:
    """``GET /``: a browser goes to the console; anything else gets a small JSON index."""

    @app.get("/", include_in_schema=False, response_model=None)
    async def index(request: Request) -> RedirectResponse | JSONResponse:
        if "text/html" in request.headers.get("accept", ""):
            return RedirectResponse("/console/", status_code=303)
        state = app.state.charter
        profiles = sorted(state.runtime.build.profiles) if state is not None else []
        return JSONResponse(
            {
                "name": "charter",
                "version": __version__,
                "api": "/v1",
                "console": "/console/",
                "docs": "/docs",
                "openapi": "/openapi.json",
                "mcp": [f"/mcp/{name}" for name in profiles],
                "health": {"live": "/healthz", "ready": "/readyz", "metrics": "/metrics"},
            }
        )


def _docs(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Charter API",
            swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER}/favicon-32x32.png",
        )

    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = original()
        _rewrite_openapi(doc)
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def _rewrite_openapi(doc: dict[str, Any]) -> None:
    """Problem schemas for every 422, the call body schema, security schemes."""
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas["CallRequest"] = CallRequest.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "API key or JWT"},
        "approvalToken": {"type": "apiKey", "in": "header", "name": APPROVAL_TOKEN_HEADER},
    }
    for path, item in doc.get("paths", {}).items():
        for operation in item.values():
            responses = operation.get("responses", {})
            invalid = responses.get("422", {}).get("content", {}).get("application/json")
            if invalid is not None and "HTTPValidationError" in str(invalid):
                responses["422"] = {
                    "description": "Unprocessable Content",
                    "content": {
                        "application/problem+json": {
                            "schema": {"$ref": "#/components/schemas/Problem"}
                        }
                    },
                }
            if path in _PUBLIC:
                operation["security"] = []
            elif path in _DECISIONS:
                operation["security"] = [{"bearer": []}, {"approvalToken": []}]
            else:
                operation["security"] = [{"bearer": []}]


@asynccontextmanager
async def _upkeep(app: FastAPI, every_s: float | None) -> AsyncIterator[None]:
    """Run :meth:`Runtime.operations.maintain` every ``every_s`` seconds while the server lives."""
    if every_s is None:
        yield
        return

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_s)
            state = app.state.charter
            if state is None:
                continue
            try:
                done = await state.runtime.operations.maintain()
            except CharterError as exc:  # a store outage: try again next round
                log(logging.WARNING, "upkeep failed", error=str(exc))
                continue
            if any(done.values()):
                log(logging.INFO, "upkeep", **done)

    task = asyncio.get_running_loop().create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
