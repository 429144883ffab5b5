"""Console sessions, CSRF tokens and Origin checks — decision logic without I/O.

A session is a signed cookie (``charter_console``): ``<payload>.<mac>``, the payload naming
the operator, the session's nonce and its expiry. The MAC key is derived from the ledger key
(so replicas sharing a deployment accept each other's sessions); a server started without a
ledger key uses a per-process random key (sessions then end with the process). The cookie is
re-checked on every request against the deployment: a principal that was removed, that is
no longer an operator, or whose API key changed since it signed in (the payload carries a
tag of the key, :meth:`~charter.deploy.deployment.Deployment.credential_tag`) loses its
session at once.

The CSRF token of a session is an HMAC of its nonce, put in every form; sign-in (no session
yet) uses a double-submit cookie (``charter_console_signin``) instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from charter.kernel.principals import Principal

SESSION_COOKIE = "charter_console"
SIGNIN_COOKIE = "charter_console_signin"
CSRF_FIELD = "csrf_token"
SESSION_LIFETIME_S = 8 * 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def same_text(presented: str, expected: str) -> bool:
    """Constant-time equality of two strings of any characters (``hmac.compare_digest`` on
    ``str`` raises for non-ASCII text, which a hostile cookie or form field may carry)."""
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    principal: str
    tenant: str
    nonce: str
    expires: int  # unix seconds
    key_tag: str | None = None  # the operator's key when it signed in (credential_tag)


class SessionKeys:
    """Signs and reads session cookies; derives CSRF tokens."""

    def __init__(self, secret: bytes | None) -> None:
        base = secret if secret is not None else secrets.token_bytes(32)
        self._mac = hmac.new(base, b"charter.console.session.v1", hashlib.sha256).digest()
        self._csrf = hmac.new(base, b"charter.console.csrf.v1", hashlib.sha256).digest()

    def issue(
        self,
        principal: Principal,
        *,
        now: int,
        not_after: int | None = None,
        key_tag: str | None = None,
    ) -> str:
        expires = now + SESSION_LIFETIME_S
        if not_after is not None:
            expires = min(expires, not_after)
        payload = {
            "p": principal.name,
            "t": principal.tenant,
            "n": secrets.token_urlsafe(16),
            "e": expires,
            "k": key_tag,
        }
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{self._sign(body)}"

    def read(self, cookie: str | None, *, now: int) -> Session | None:
        if not cookie or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        if not same_text(mac, self._sign(body)):
            return None
        try:
            payload = json.loads(_unb64(body))
            session = Session(
                principal=str(payload["p"]),
                tenant=str(payload["t"]),
                nonce=str(payload["n"]),
                expires=int(payload["e"]),
                key_tag=None if payload.get("k") is None else str(payload["k"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > now else None

    def csrf_token(self, session: Session) -> str:
        return _b64(hmac.new(self._csrf, session.nonce.encode(), hashlib.sha256).digest())

    def csrf_ok(self, session: Session, presented: str | None) -> bool:
        return bool(presented) and same_text(str(presented), self.csrf_token(session))

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._mac, body.encode(), hashlib.sha256).digest())


def same_origin(origin: str | None, referer: str | None, *, scheme: str, host: str) -> bool:
    """True when the request's ``Origin`` (or, without one, its ``Referer``) is this site.

    A POST carrying neither is refused: every browser sends ``Origin`` on a form POST.
    """
    expected = f"{scheme}://{host}".lower()
    if origin is not None and origin != "null":
        return origin.lower().rstrip("/") == expected
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}".lower() == expected
    return False
