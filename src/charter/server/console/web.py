"""What every console page needs: the server state, the signed-in operator, forms, templates.

Pages reach the runtime through :class:`Console` (``app.state.console``). A page depends on
:func:`operator` (a signed-in operator, else a redirect to the sign-in page); a form handler
on :func:`checked_form` (the same, plus the ``Origin`` check and the CSRF token, else 403).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from starlette.datastructures import FormData

from charter.contracts.text import MAX_REASON  # as the API's DecisionRequest, EndRequest
from charter.errors import InvalidInput
from charter.kernel.principals import Principal
from charter.proposals import ProposalService, load_proposal_settings
from charter.server.console import views
from charter.server.console.session import (
    CSRF_FIELD,
    SESSION_COOKIE,
    Session,
    SessionKeys,
    same_origin,
)
from charter.server.state import ServerState

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=HERE / "templates")
TEMPLATES.env.filters.update(views.FILTERS)
TEMPLATES.env.globals.update(views.GLOBALS)


class SignInRequired(Exception):
    """No valid session: the handler redirects to the sign-in page."""


class Refused(Exception):
    """A console refusal rendered as an HTML error page."""

    def __init__(self, status: int, title: str, detail: str, reason: str) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.reason = status, title, detail, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Operator:
    principal: Principal
    session: Session
    csrf: str


class Console:
    def __init__(self, state_of: Callable[[], ServerState | None]) -> None:
        self._state_of = state_of
        self._keys: SessionKeys | None = None
        self._proposals: ProposalService | None = None

    @property
    def state(self) -> ServerState:
        state = self._state_of()
        if state is None:
            raise Refused(503, "Not ready", "the server is starting", "NOT_READY")
        return state

    @property
    def keys(self) -> SessionKeys:
        if self._keys is None:
            key = self.state.ledger_key
            self._keys = SessionKeys(key.secret if key is not None else None)
        return self._keys

    @property
    def proposals(self) -> ProposalService:
        """The proposal service over the runtime, with the deployment's
        ``proposals:`` settings (read once per runtime)."""
        runtime = self.state.runtime
        if self._proposals is None or self._proposals.runtime is not runtime:
            settings = load_proposal_settings(runtime.deployment.source)
            self._proposals = ProposalService(runtime, settings)
        return self._proposals


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def now_s() -> int:
    return int(time.time())


def session_operator(request: Request) -> Operator | None:
    console = console_of(request)
    session = console.keys.read(request.cookies.get(SESSION_COOKIE), now=now_s())
    if session is None:
        return None
    deployment = console.state.runtime.deployment
    principal = deployment.principals.get(session.principal)
    if principal is None or not principal.is_operator or principal.tenant != session.tenant:
        return None
    if session.key_tag != deployment.credential_tag(principal.name):  # the key was rotated
        return None
    request.state.principal = principal  # for the access log
    return Operator(principal=principal, session=session, csrf=console.keys.csrf_token(session))


def operator(request: Request) -> Operator:
    found = session_operator(request)
    if found is None:
        raise SignInRequired()
    return found


def check_origin(request: Request) -> None:
    host = request.headers.get("host", "")
    if not same_origin(
        request.headers.get("origin"),
        request.headers.get("referer"),
        scheme=request.url.scheme,
        host=host,
    ):
        raise Refused(
            403,
            "Refused",
            "this form was not sent from this console (Origin check)",
            "ORIGIN_MISMATCH",
        )


async def checked_form(request: Request) -> tuple[Operator, FormData]:
    """The signed-in operator and the posted form, after the Origin and CSRF checks."""
    who = operator(request)
    check_origin(request)
    form = await request.form()
    token = form.get(CSRF_FIELD)
    if not console_of(request).keys.csrf_ok(who.session, token if isinstance(token, str) else None):
        raise Refused(
            403,
            "Refused",
            "the form's CSRF token is missing or wrong; reload the page and try again",
            "CSRF_INVALID",
        )
    return who, form


def field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def reason_field(form: FormData) -> str:
    """The form's ``reason``, at most as long as the API accepts (refused before recording)."""
    reason = field(form, "reason")
    if len(reason) > MAX_REASON:
        raise InvalidInput(
            f"the reason is at most {MAX_REASON} characters", reason="REASON_TOO_LONG"
        )
    return reason


def render(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    who: Operator | None = None,
    status: int = 200,
) -> HTMLResponse:
    full = {"request": request, "who": who, "csrf_field": CSRF_FIELD, **context}
    return TEMPLATES.TemplateResponse(request, template, full, status_code=status)
