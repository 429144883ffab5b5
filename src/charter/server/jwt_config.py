"""The ``jwt:`` section of the deployment file: how the server checks bearer JWTs.

.. code-block:: yaml

    jwt:
      algorithms: [RS256]              # HS256 | RS256 | ES256 | EdDSA (one family per file)
      public_key: {file: keys/idp.pem} # RS*/ES*/EdDSA: a PEM public key, by reference
      # secret: {env: CHARTER_JWT_SECRET}   # HS256 instead: a shared secret, by reference
      audience: charter                # required: tokens for another audience are refused
      issuer: https://idp.example      # optional: when given, ``iss`` must equal it
      leeway_s: 0                      # optional clock skew allowance for exp / nbf

A token's ``sub`` claim names a principal of the same deployment file; that principal's tenant,
kind and permissions apply. ``exp`` is required; ``nbf`` and ``aud`` are checked. The section is
read from the same YAML file as the rest of the deployment; the kernel ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from charter.deploy.deployment import Deployment
from charter.deploy.secret_ref import SecretRef
from charter.errors import ConfigError

_FIELDS = frozenset({"algorithms", "secret", "public_key", "audience", "issuer", "leeway_s"})
_HMAC = frozenset({"HS256", "HS384", "HS512"})
_ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"})


@dataclass(frozen=True, slots=True, kw_only=True)
class JwtConfig:
    algorithms: tuple[str, ...]
    key: bytes
    audience: str
    issuer: str | None = None
    leeway_s: float = 0.0

    def __repr__(self) -> str:  # never print the key
        return (
            f"JwtConfig(algorithms={self.algorithms!r}, audience={self.audience!r}, "
            f"issuer={self.issuer!r})"
        )


def _fail(file: Path | str, where: str, message: str) -> ConfigError:
    return ConfigError(f"{file}: jwt.{where}: {message}" if where else f"{file}: jwt: {message}")


def _ref(file: Path, where: str, value: Any) -> SecretRef:
    if not isinstance(value, Mapping) or len(value) != 1 or not ({"env", "file"} & set(value)):
        raise _fail(file, where, "give a reference: {env: VAR} or {file: PATH}")
    if "env" in value:
        return SecretRef(env=str(value["env"]))
    path = Path(str(value["file"]))
    return SecretRef(file=path if path.is_absolute() else file.parent / path)


def parse_jwt(section: Any, *, file: Path) -> JwtConfig:
    """Validate a ``jwt:`` section and resolve its key reference."""
    if not isinstance(section, Mapping):
        raise _fail(file, "", "must be a mapping")
    unknown = sorted(set(section) - _FIELDS)
    if unknown:
        raise _fail(file, unknown[0], "unknown field")
    algorithms = section.get("algorithms")
    if (
        not isinstance(algorithms, list)
        or not algorithms
        or not all(isinstance(a, str) for a in algorithms)
    ):
        raise _fail(file, "algorithms", "is required: a list such as [HS256] or [RS256]")
    chosen = frozenset(algorithms)
    if not chosen <= _HMAC | _ASYMMETRIC:
        raise _fail(file, "algorithms", f"supported: {', '.join(sorted(_HMAC | _ASYMMETRIC))}")
    if chosen & _HMAC and chosen & _ASYMMETRIC:
        raise _fail(file, "algorithms", "do not mix HMAC and public-key algorithms")
    audience = section.get("audience")
    if not isinstance(audience, str) or not audience:
        raise _fail(file, "audience", "is required")
    issuer = section.get("issuer")
    if issuer is not None and not isinstance(issuer, str):
        raise _fail(file, "issuer", "must be a string")
    leeway = section.get("leeway_s", 0)
    if not isinstance(leeway, int | float) or isinstance(leeway, bool) or leeway < 0:
        raise _fail(file, "leeway_s", "must be a non-negative number")
    if chosen & _HMAC:
        if "secret" not in section or "public_key" in section:
            raise _fail(file, "secret", "HMAC algorithms need secret (and no public_key)")
        key = _ref(file, "secret", section["secret"]).load(what=f"{file}: jwt.secret")
        if len(key) < 32:
            raise _fail(file, "secret", "must be at least 32 bytes for HS256")
    else:
        if "public_key" not in section or "secret" in section:
            raise _fail(file, "public_key", "public-key algorithms need public_key (a PEM)")
        key = _ref(file, "public_key", section["public_key"]).load(what=f"{file}: jwt.public_key")
    return JwtConfig(
        algorithms=tuple(algorithms),
        key=key,
        audience=audience,
        issuer=issuer,
        leeway_s=float(leeway),
    )


def load_jwt_config(deployment: Deployment) -> JwtConfig | None:
    """The ``jwt:`` section of the deployment's file, or ``None`` when it has none."""
    if deployment.source is None or not deployment.source.is_file():
        return None
    try:
        doc = yaml.safe_load(deployment.source.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{deployment.source}: cannot read the jwt section") from exc
    if not isinstance(doc, Mapping) or doc.get("jwt") is None:
        return None
    return parse_jwt(doc["jwt"], file=deployment.source)
