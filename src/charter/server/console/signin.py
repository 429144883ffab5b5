"""Sign-in and sign-out: an operator's API key or JWT becomes a session cookie.

Application credentials are refused (403): the console is where humans approve, and an
application may never approve. The sign-in form is protected by a double-submit cookie and
the Origin check; the session cookie is ``HttpOnly``, ``SameSite=Strict``, scoped to
``/console`` and ``Secure`` when the request came over TLS.
"""

from __future__ import annotations

import secrets
from typing import Annotated

import jwt
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from charter.errors import PermissionDenied
from charter.server.console.session import CSRF_FIELD, SESSION_COOKIE, SIGNIN_COOKIE, same_text
from charter.server.console.web import (
    check_origin,
    checked_form,
    console_of,
    field,
    now_s,
    render,
    session_operator,
)
from charter.server.query import QueryRoute

router = APIRouter(route_class=QueryRoute)
PREFIX = "/console"


def safe_next(value: str | None) -> str:
    """Only a path inside the console (no scheme, no ``//host``): no open redirect."""
    if (
        value
        and value.startswith(f"{PREFIX}/")
        and "\\" not in value
        and "://" not in value
        and "//" not in value
    ):
        return value
    return f"{PREFIX}/approvals"


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _signin_page(
    request: Request, *, next_url: str, error: str | None = None, status: int = 200
) -> HTMLResponse:
    token = secrets.token_urlsafe(24)
    response = render(
        request,
        "signin.html",
        {"signin_token": token, "next_url": next_url, "error": error},
        status=status,
    )
    _cookie(response, request, SIGNIN_COOKIE, token, 1800)
    return response


@router.get("/login", response_class=HTMLResponse)
async def signin_form(request: Request, next: str | None = None) -> Response:
    if session_operator(request) is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    return _signin_page(request, next_url=safe_next(next))


@router.post("/login", response_class=HTMLResponse)
async def signin(request: Request) -> Response:
    check_origin(request)
    form = await request.form()
    next_url = safe_next(field(form, "next"))
    expected = request.cookies.get(SIGNIN_COOKIE)
    presented = field(form, CSRF_FIELD)
    if not expected or not same_text(presented, expected):
        return _signin_page(
            request,
            next_url=next_url,
            error="The sign-in form expired; please try again.",
            status=403,
        )
    credential = field(form, "credential")
    console = console_of(request)
    try:
        principal = console.state.authenticator.principal(f"Bearer {credential}")
    except PermissionDenied as exc:
        return _signin_page(
            request,
            next_url=next_url,
            error=f"Sign-in failed: {exc.message} ({exc.reason}).",
            status=401,
        )
    if not principal.is_operator:
        return _signin_page(
            request,
            next_url=next_url,
            error=(
                "This is an application credential. Only operators (people) sign in to the "
                "console; applications can never approve (APPROVER_NOT_HUMAN)."
            ),
            status=403,
        )
    not_after = None
    if console.state.authenticator.jwt is not None and credential.count(".") == 2:
        # it was read as a JWT (as Authenticator.principal does): the session ends with it
        claims = jwt.decode(credential, options={"verify_signature": False})
        not_after = int(claims["exp"])
    now = now_s()
    tag = console.state.runtime.deployment.credential_tag(principal.name)
    cookie = console.keys.issue(principal, now=now, not_after=not_after, key_tag=tag)
    response = RedirectResponse(next_url, status_code=303)
    _cookie(response, request, SESSION_COOKIE, cookie, max(1, (not_after or now + 28800) - now))
    response.delete_cookie(SIGNIN_COOKIE, path=PREFIX)
    return response


@router.post("/logout")
async def signout(request: Request, checked: Annotated[object, Depends(checked_form)]) -> Response:
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=PREFIX)
    return response
