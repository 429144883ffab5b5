"""Who is calling: bearer API keys and JWTs, each mapped to a principal of the deployment.

``Authorization: Bearer <credential>``:

* an **API key** is looked up with :meth:`Deployment.authenticate` (SHA-256 digests compared
  in constant time);
* a **JWT** (three dot-separated parts, when the deployment has a ``jwt:`` section) is
  verified with PyJWT — signature, ``exp`` (required), ``nbf``, ``aud`` and optionally
  ``iss`` — and its ``sub`` names the principal.

Every failure is a :class:`~charter.errors.PermissionDenied` with an ``AUTH_*`` reason, which
the server answers as ``401`` problem+json. The credential never appears in a message or log.
The standalone approval token travels in its own header (``X-Charter-Approval-Token``) and is
accepted only by the approve/reject endpoints. A credential header sent twice (two
``Authorization`` headers, say) is ``AUTH_INVALID`` — never "the first one wins": a proxy or
another reader in front of the server may have taken the other one (:func:`credential_header`).
"""

from __future__ import annotations

import jwt
from starlette.datastructures import Headers

from charter.deploy.deployment import Deployment
from charter.errors import PermissionDenied
from charter.kernel.principals import Principal
from charter.server.jwt_config import JwtConfig

APPROVAL_TOKEN_HEADER = "X-Charter-Approval-Token"
TENANT_HEADER = "X-Charter-Tenant"


def _denied(message: str, reason: str) -> PermissionDenied:
    return PermissionDenied(message, reason=reason)


def credential_header(headers: Headers, name: str) -> str | None:
    """The one value of the credential header ``name`` (``None`` when absent). Sent more than
    once it is ambiguous — which one counts would depend on who reads the request — so it is
    refused as ``AUTH_INVALID`` whatever the values."""
    values = headers.getlist(name)
    if len(values) > 1:
        raise _denied(
            f"the {name} header was sent {len(values)} times: send one credential", "AUTH_INVALID"
        )
    return values[0] if values else None


class Authenticator:
    def __init__(self, deployment: Deployment, jwt_config: JwtConfig | None = None) -> None:
        self.deployment = deployment
        self.jwt = jwt_config

    def bearer(self, authorization: str | None) -> str:
        if not authorization:
            raise _denied("send Authorization: Bearer <API key or JWT>", "AUTH_MISSING")
        scheme, _, credential = authorization.partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise _denied("the Authorization header must be 'Bearer <credential>'", "AUTH_INVALID")
        return credential

    def principal(self, authorization: str | None) -> Principal:
        """The principal the ``Authorization`` header names, or an ``AUTH_*`` denial."""
        credential = self.bearer(authorization)
        if self.jwt is not None and credential.count(".") == 2:
            return self._from_jwt(credential, self.jwt)
        found = self.deployment.authenticate(credential)
        if found is None:
            raise _denied("the credential is not valid", "AUTH_INVALID")
        return found

    def _from_jwt(self, token: str, config: JwtConfig) -> Principal:
        try:
            claims = jwt.decode(
                token,
                config.key,
                algorithms=list(config.algorithms),
                audience=config.audience,
                issuer=config.issuer,
                leeway=config.leeway_s,
                options={"require": ["exp", "sub", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise _denied("the token has expired", "AUTH_TOKEN_EXPIRED") from None
        except jwt.ImmatureSignatureError:
            raise _denied("the token is not valid yet (nbf)", "AUTH_TOKEN_NOT_YET_VALID") from None
        except jwt.InvalidAudienceError:
            raise _denied("the token is for another audience", "AUTH_AUDIENCE") from None
        except jwt.InvalidIssuerError:
            raise _denied("the token comes from another issuer", "AUTH_ISSUER") from None
        except jwt.PyJWTError:
            raise _denied("the token is not valid", "AUTH_INVALID") from None
        subject = claims.get("sub")
        principal = self.deployment.principals.get(subject) if isinstance(subject, str) else None
        if principal is None:
            raise _denied(
                "the token's subject is not a principal of this deployment",
                "AUTH_UNKNOWN_SUBJECT",
            )
        return principal
