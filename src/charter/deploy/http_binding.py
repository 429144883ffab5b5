"""An ``executor: http`` binding of the deployment file: its URL, its two secrets, its limits
and the certificate authority its ``https`` executor is trusted by (``docs/deploy.md``).

``ca: {file: PATH}`` (or ``{env: VAR}`` holding the PEM text) names the PEM certificates
that alone are trusted for this binding's TLS — instead of the system's trust store — as an
executor behind a private certificate authority needs. The file is read and checked when the
deployment loads: a missing, unreadable or non-PEM file is a ``ConfigError`` naming the
binding and the field, at ``charter check`` and at start-up alike. A relative path is relative
to the deployment file, as every ``{file: PATH}`` reference is.
"""

from __future__ import annotations

import hmac
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charter.deploy.reader import _join, _Reader
from charter.deploy.secret_ref import _ENV_NAME, SecretRef

HTTP_URL = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?$")
HTTP_FIELDS = frozenset(
    {"url", "credential", "signing_key", "timeout_s", "max_response_bytes", "ca"}
)
_PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
_MAX_CA_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """The PEM certificates one binding trusts for TLS, as read when the deployment loaded.

    Not a secret (certificates are public): printed as its reference, ``file:PATH`` or
    ``env:VAR``; ``pem`` is the text, already checked to load as trust anchors."""

    reference: str
    pem: str = field(repr=False, compare=False)

    def context(self) -> ssl.SSLContext:
        """A client context that verifies certificates against these authorities only."""
        return ssl.create_default_context(cadata=self.pem)


def http_options(
    r: _Reader, spec: Mapping[str, Any], where: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """``executor: http``: ``url`` and two distinct secrets are required; see docs/deploy.md."""
    for key in ("url", "credential", "signing_key"):
        if key not in spec:
            raise r.fail(_join(where, key), "is required for executor: http")
    url = spec["url"]
    if not isinstance(url, str) or not HTTP_URL.match(url):
        raise r.fail(
            _join(where, "url"),
            "must be an http:// or https:// base URL without credentials, query or fragment",
        )
    options: dict[str, Any] = {"url": url.rstrip("/")}
    loaded: dict[str, bytes] = {}
    for key in ("credential", "signing_key"):
        ref = r.secret(spec[key], _join(where, key))
        assert isinstance(ref, SecretRef)
        loaded[key] = ref.load(env, what=f"{r.file}: {_join(where, key)}")
        options[key] = ref
    if hmac.compare_digest(loaded["credential"], loaded["signing_key"]):
        raise r.fail(
            _join(where, "signing_key"),
            "must differ from the credential (the credential is sent; the signing key never is)",
        )
    if "timeout_s" in spec:
        options["timeout_s"] = r.positive(spec["timeout_s"], _join(where, "timeout_s"))
    if "max_response_bytes" in spec:
        options["max_response_bytes"] = int(
            r.positive(spec["max_response_bytes"], _join(where, "max_response_bytes"), integer=True)
        )
    if "ca" in spec:
        if not url.startswith("https://"):
            raise r.fail(_join(where, "ca"), "applies to https:// urls only")
        options["ca"] = certificate_authority(r, spec["ca"], _join(where, "ca"), env)
    return options


def certificate_authority(
    r: _Reader, value: Any, where: str, env: Mapping[str, str]
) -> CertificateAuthority:
    """``{file: PATH}`` or ``{env: VAR}``: PEM certificates, read and checked now."""
    if not isinstance(value, dict) or len(value) != 1:
        raise r.fail(where, "must be {file: PATH} (a PEM file of CA certificates) or {env: VAR}")
    r.mapping(value, where, frozenset({"file", "env"}))
    ((kind, target),) = value.items()
    if kind == "env":
        if not isinstance(target, str) or not _ENV_NAME.match(target):
            raise r.fail(_join(where, "env"), "must be an environment variable name")
        text = env.get(target)
        if text is None:
            raise r.fail(where, f"environment variable {target} is not set")
        reference = f"env:{target}"
    else:
        if not isinstance(target, str) or not target:
            raise r.fail(_join(where, "file"), "must be a file path")
        path = Path(target)
        if not path.is_absolute() and isinstance(r.file, Path):
            path = r.file.parent / path
        reference = f"file:{path}"
        try:
            with path.open("rb") as handle:
                raw = handle.read(_MAX_CA_BYTES + 1)
        except FileNotFoundError:
            raise r.fail(where, f"the CA file {path} does not exist") from None
        except OSError as exc:
            raise r.fail(where, f"cannot read the CA file {path}: {exc.strerror}") from None
        if len(raw) > _MAX_CA_BYTES:
            raise r.fail(where, f"the CA file {path} is larger than {_MAX_CA_BYTES} bytes")
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            text = ""  # DER or anything else that is not PEM text
    ca = CertificateAuthority(reference=reference, pem=text)
    problem = "has no PEM certificate (-----BEGIN CERTIFICATE-----)"
    if _PEM_CERTIFICATE in text:
        try:
            ca.context()
            return ca
        except ssl.SSLError as exc:
            problem = f"has a PEM certificate that does not load ({exc.reason or 'invalid'})"
    raise r.fail(where, f"{reference} {problem}")


def read_ca_file(path: str, *, label: str) -> CertificateAuthority:
    """A CA file named outside a deployment (``charter import-mcp --ca FILE``), read and
    checked by the same rules; a problem is a ``ConfigError`` starting with ``label``."""
    return certificate_authority(_Reader(label), {"file": path}, "", {})
