"""``create_console(state_of) -> FastAPI``: the console as an ASGI app mounted at ``/console``.

It shares the API's :class:`~charter.server.state.ServerState` (through ``state_of``, since
``charter serve`` opens the runtime at start-up). Every answer carries a strict
Content-Security-Policy (``script-src 'self'``: no inline scripts, no CDN); failures render
as HTML pages with the same statuses the API uses (another tenant's run is a 404, like a
missing one); a missing session redirects to the sign-in page.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.errors import Failure
from charter.server.console import (
    approvals,
    attention,
    audit,
    disclosure,
    proposals,
    readiness,
    runs,
    signin,
)
from charter.server.console.web import Console, Refused, SignInRequired, render, session_operator
from charter.server.problems import retry_after_of, status_for
from charter.server.state import ServerState

STATIC = Path(__file__).parent / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    """Pure ASGI (SSE streams pass through untouched): CSP and friends on every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += SECURITY_HEADERS
                if not scope["path"].startswith(("/static/", "/console/static/")):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def create_console(state_of: Callable[[], ServerState | None], *, poll_s: float = 1.0) -> FastAPI:
    """The console app; ``poll_s`` is how often the approvals stream re-reads the inbox."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = Console(state_of)
    app.state.console_poll_s = poll_s
    for module in (signin, approvals, proposals, runs, attention, readiness, audit, disclosure):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="console-static")

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return RedirectResponse("/console/approvals", status_code=303)

    _handlers(app)
    app.add_middleware(SecurityHeaders)
    return app


def _error(request: Request, status: int, title: str, detail: str, reason: str) -> HTMLResponse:
    return render(
        request,
        "error.html",
        {"status": status, "title": title, "detail": detail, "reason": reason},
        who=session_operator(request) if status != 503 else None,
        status=status,
    )


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(SignInRequired)
    async def on_signin(request: Request, exc: SignInRequired) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/console/login?next={quote(target)}", status_code=303)

    @app.exception_handler(Refused)
    async def on_refused(request: Request, exc: Refused) -> HTMLResponse:
        return _error(request, exc.status, exc.title, exc.detail, exc.reason)

    @app.exception_handler(Failure)
    async def on_failure(request: Request, exc: Failure) -> HTMLResponse:
        status = status_for(exc.code, exc.reason)
        if exc.reason.endswith("_NOT_FOUND"):
            status = 404
        title = "Not found" if status == 404 else "Refused" if status < 500 else "Error"
        page = _error(request, status, title, exc.message, exc.reason)
        retry = retry_after_of(exc)  # 429 TOO_MANY_STREAMS: when to come back
        if retry is not None:
            page.headers["Retry-After"] = retry
        return page

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> HTMLResponse:
        where = ", ".join(".".join(str(p) for p in e.get("loc", ())) for e in exc.errors())
        # the locations only, never the value sent (it may hold a secret)
        return _error(request, 422, "Request refused", f"invalid: {where}", "REQUEST_INVALID")

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> HTMLResponse:
        title = "Not found" if exc.status_code == 404 else "Request refused"
        return _error(request, exc.status_code, title, str(exc.detail), "HTTP")
