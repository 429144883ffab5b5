"""The deployment file: how a project runs in ONE environment (not part of the Build).

``charter.deploy.yaml`` beside ``charter.yaml``, or the file named by ``--deploy FILE`` or the
``CHARTER_DEPLOY`` environment variable, declares who may call (principals and their
credentials, by reference only), which executor serves each tool, the governance mode, the
secrets the runtime needs, lifetimes, limits and enablement. ``docs/deploy.md`` is the
reference for every field.

Secrets are never written in the file: a secret is ``{env: VAR}`` or ``{file: PATH}``; an API
key may also be given as ``{sha256: HEX}``, the hash of the key. Secret values are resolved
once, when the file is loaded, and never appear in an error message, a ``repr``, a log line or
:meth:`Deployment.describe`. The deployment keeps only SHA-256 digests of API keys and of the
approval token, and compares them in constant time.

When no deployment file exists, :func:`local_default_deployment` gives documented development
defaults whose keys live in ``.charter/*.key`` files (mode 0600), never in the database.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from charter.contracts.model import PERMISSION, TOOL_ID, Effect
from charter.deploy.audit_settings import AuditSettings, parse_audit
from charter.deploy.http_binding import (
    HTTP_FIELDS,
    HTTP_URL,
    CertificateAuthority,
    certificate_authority,
    http_options,
)
from charter.deploy.http_limits import KEY as HTTP_KEY
from charter.deploy.http_limits import HeadLimits, head_limits
from charter.deploy.limits import KEYS, call_limits, hook_deadline_s, pending_caps
from charter.deploy.policy import PolicySettings, parse_policy
from charter.deploy.reader import _join, _Reader
from charter.deploy.redaction import known_secrets, parse_redaction, sections_secrets
from charter.deploy.remote_settings import DEFAULT_READINESS_TTL_S, remote_settings
from charter.deploy.secret_ref import SecretRef
from charter.deploy.stream_limits import KEY as STREAMS_KEY
from charter.deploy.stream_limits import StreamLimits, stream_limits
from charter.errors import ConfigError
from charter.executors.egress import EgressPolicy
from charter.kernel.limits import LimitSettings, PendingCaps
from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.redaction import RedactionSettings
from charter.kernel.settings import Mode
from charter.project.yamlio import strict_load, yaml_problem

DEPLOY_FILE = "charter.deploy.yaml"
DEPLOY_ENV_VAR = "CHARTER_DEPLOY"
LOCAL_DIR = ".charter"
LOCAL_OPERATOR = "local"
LOCAL_TENANT = "local"
LOCAL_KEY_FILES: Mapping[str, str] = MappingProxyType(
    {
        "fingerprint_key": "fingerprint.key",
        "ledger_key": "ledger.key",
        "operator_api_key": "operator.key",
    }
)
EXECUTOR_KINDS: frozenset[str] = frozenset({"python", "subprocess", "http", "mcp"})
_BINDING_OPTIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "python": frozenset(),
        "subprocess": frozenset(),
        "http": HTTP_FIELDS,
        "mcp": frozenset({"command", "url", "credential", "cwd", "ca"}),
    }
)
_DEFAULT_EXECUTOR_KINDS: frozenset[str] = frozenset({"python", "subprocess"})
DEFAULT_APPROVAL_LIFETIME_S = 300.0
DEFAULT_CONTEXT_LIFETIME_S = 900.0

_PRINCIPAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    """Which executor serves one tool in this environment."""

    executor: str
    required: bool = True  # a required tool that is not ready blocks context resolution
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Deployment-wide budgets. ``None`` means unlimited where allowed."""

    run_tool_calls: int | None = 1000  # tool calls per run
    run_elapsed_s: float | None = 3600.0  # wall time from a run's creation to its last call
    context_tokens: int = 32000  # estimated tokens of a resolved context (schemas + attachments)
    max_args_bytes: int = 1024 * 1024  # raw argument document size
    calls: LimitSettings = field(default_factory=LimitSettings)  # rate, concurrency (limits.py)
    pending: PendingCaps = field(default_factory=PendingCaps)  # pending approvals at once
    policy_hook_deadline_s: float = 0.25  # each ownership hook
    session_idle_s: float | None = 3600.0  # session runs idle this long are ended
    renew_session_budgets: bool = True  # a session past its run's budgets gets a fresh run
    run_metadata_retention_s: float | None = None  # ended runs' fingerprints erased after
    http: HeadLimits = field(default_factory=HeadLimits)  # a request head (http_limits.py)
    streams: StreamLimits = field(default_factory=StreamLimits)  # open SSE (stream_limits.py)


_S3_PREFIX = "charter/artifacts/"
_MAX_UPLOAD = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactSettings:
    """Where a deployment keeps artifacts (``artifacts:``; see ``docs/artifacts.md``).

    ``store: local`` (default) keeps them under ``root`` (default ``.charter/artifacts``,
    relative to the project); ``store: s3`` in ``bucket`` under ``prefix``, through
    ``endpoint_url`` / ``region`` with boto3's usual credential chain.
    """

    store: str = "local"
    root: str | None = None
    bucket: str | None = None
    prefix: str = _S3_PREFIX
    endpoint_url: str | None = None
    region: str | None = None
    quota_bytes: int | None = None  # per run; None: the store's default (1 GiB)
    quota_files: int | None = None  # per run; None: the store's default (10,000)
    expected_bucket_owner: str | None = None  # S3: the 12-digit account id that owns the bucket
    max_upload_bytes: int = _MAX_UPLOAD  # one HTTP upload


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """A loaded, validated deployment. Build with :func:`load_deployment`."""

    environment: str
    mode: Mode
    principals: Mapping[str, Principal]
    bindings: Mapping[str, Binding]
    fingerprint_key: SecretRef | None = None
    ledger_key: SecretRef | None = None
    approval_token: SecretRef | None = None
    approval_lifetime_s: float = DEFAULT_APPROVAL_LIFETIME_S
    context_lifetime_s: float = DEFAULT_CONTEXT_LIFETIME_S
    # how long a readiness report (each remote executor's describe / tool listing) is
    # trusted, at context resolution and before every remote call's intent
    readiness_ttl_s: float = DEFAULT_READINESS_TTL_S
    # where remote executors may be reached (``egress.allow``); see docs/deploy.md
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    limits: Limits = field(default_factory=Limits)
    artifacts: ArtifactSettings = field(default_factory=ArtifactSettings)
    # Proposal and write tools run only when named here; read tools are on by default.
    # ``None`` lifts the restriction (the local development default only).
    enabled_tools: frozenset[str] | None = frozenset()
    kill_switch: bool = False  # True: no tool runs at all
    policy: PolicySettings = field(default_factory=PolicySettings)  # the ``policy:`` section
    default_executor: str | None = None  # for tools without a binding; None = unbound
    source: Path | None = None  # the file it was read from; None for the local default
    # name -> "env:VAR" | "file:PATH" | "sha256" (how the principal's key was given)
    credential_refs: Mapping[str, str] = field(default_factory=dict)
    # the ``redaction:`` section: extra key names, RE2 patterns, secret values by reference
    redaction: RedactionSettings = field(default_factory=RedactionSettings)
    audit: AuditSettings = field(default_factory=AuditSettings)  # the ``audit:`` section
    # every secret reference the file named (keys, credentials, redaction values)
    secret_refs: tuple[SecretRef, ...] = field(default=(), repr=False, compare=False)
    # name -> sha256(api key); never the key itself
    _key_digests: Mapping[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    _token_digest: bytes | None = field(default=None, repr=False, compare=False)

    def authenticate(self, api_key: str) -> Principal | None:
        """The principal whose API key this is, or ``None``. Constant time per principal."""
        offered = hashlib.sha256(api_key.encode("utf-8", "surrogateescape")).digest()
        found: Principal | None = None
        for name, digest in self._key_digests.items():
            # compare every key, no early exit: timing does not depend on which one matched
            if hmac.compare_digest(offered, digest):
                found = self.principals[name]
        return found

    def credential_tag(self, name: str) -> str | None:
        """A short tag of principal ``name``'s API key (a hash of its digest, never the key),
        or None when it has none: a console session carries the tag it was signed in with,
        so rotating the key ends the sessions signed in with the old one."""
        digest = self._key_digests.get(name)
        if digest is None:
            return None
        return hashlib.sha256(b"charter.console.key.v1" + digest).hexdigest()[:32]

    def approval_token_matches(self, token: str) -> bool:
        """True if ``token`` is this deployment's standalone approval token."""
        if self._token_digest is None or not token:
            return False
        offered = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        return hmac.compare_digest(offered, self._token_digest)

    def known_secrets(self) -> frozenset[str]:
        """The values of every secret this deployment references (see
        :func:`charter.deploy.redaction.known_secrets`)."""
        return known_secrets(self)

    def is_enabled(self, tool_id: str, effect: Effect | str) -> bool:
        """Enablement: kill switch off, and a read tool or a tool enabled by name."""
        if self.kill_switch:
            return False
        if Effect(effect) is Effect.READ:
            return True
        return self.enabled_tools is None or tool_id in self.enabled_tools

    def binding_for(self, tool_id: str) -> Binding | None:
        """The tool's binding, else the default executor's, else ``None`` (not bound)."""
        binding = self.bindings.get(tool_id)
        if binding is None and self.default_executor is not None:
            return Binding(executor=self.default_executor)
        return binding

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary for ``--json`` output: references only, never a secret."""

        def ref(value: SecretRef | None) -> str | None:
            return value.reference if value is not None else None

        return {
            "environment": self.environment,
            "mode": self.mode.value,
            "source": str(self.source) if self.source is not None else None,
            "secrets": {
                "fingerprint_key": ref(self.fingerprint_key),
                "ledger_key": ref(self.ledger_key),
                "approval_token": ref(self.approval_token),
            },
            "approvals": {"lifetime_s": self.approval_lifetime_s},
            "contexts": {"lifetime_s": self.context_lifetime_s},
            "readiness": {"ttl_s": self.readiness_ttl_s},
            "egress": {"allow": self.egress.describe()},
            "limits": {
                "run_tool_calls": self.limits.run_tool_calls,
                "run_elapsed_s": self.limits.run_elapsed_s,
                "context_tokens": self.limits.context_tokens,
                "max_args_bytes": self.limits.max_args_bytes,
                "session_idle_s": self.limits.session_idle_s,
                "renew_session_budgets": self.limits.renew_session_budgets,
                "run_metadata_retention_s": self.limits.run_metadata_retention_s,
                "http": self.limits.http.describe(),
                "streams": self.limits.streams.describe(),
            },
            "enable": sorted(self.enabled_tools) if self.enabled_tools is not None else "all",
            "kill_switch": self.kill_switch,
            "audit": self.audit.describe(),
            "policy": self.policy.describe(),
            "default_executor": self.default_executor,
            "principals": {
                name: {
                    "kind": p.kind.value,
                    "tenant": p.tenant,
                    "permissions": sorted(p.permissions),
                    "roles": sorted(p.roles),
                    "api_key": self.credential_refs.get(name),
                }
                for name, p in sorted(self.principals.items())
            },
            "bindings": {
                tool: {
                    "executor": b.executor,
                    "required": b.required,
                    **{
                        k: v.reference if isinstance(v, SecretRef | CertificateAuthority) else v
                        for k, v in b.options.items()
                    },
                }
                for tool, b in sorted(self.bindings.items())
            },
        }


# ---------------------------------------------------------------------------------------
# Loading


def deployment_path(
    path: Path | None, *, project_dir: Path, env: Mapping[str, str] = os.environ
) -> Path | None:
    """Which deployment file applies: ``path``, else ``$CHARTER_DEPLOY``, else the project's
    ``charter.deploy.yaml`` if it exists, else ``None`` (use the local default)."""
    if path is not None:
        return path
    named = env.get(DEPLOY_ENV_VAR)
    if named:
        return Path(named)
    candidate = project_dir / DEPLOY_FILE
    return candidate if candidate.is_file() else None


def load_deployment(
    path: Path | None, *, project_dir: Path, env: Mapping[str, str] = os.environ
) -> Deployment:
    """Load and validate the deployment for ``project_dir`` (see :func:`deployment_path`).

    Raises :class:`ConfigError` naming the file and the field; secrets are resolved here (from
    ``env`` and files) and never appear in the error.
    """
    chosen = deployment_path(path, project_dir=project_dir, env=env)
    if chosen is None:
        return local_default_deployment(project_dir)
    return parse_deployment(_read_yaml(chosen), file=chosen, env=env)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: deployment file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: deployment file is not valid UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the deployment file: {exc.strerror}") from None
    try:
        return strict_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None


_TOP = frozenset(
    {
        "environment",
        "mode",
        "secrets",
        "approvals",
        "contexts",
        "principals",
        "bindings",
        "limits",
        "enable",
        "kill_switch",
        "default_executor",
        "jwt",  # read by charter.server.jwt_config (the HTTP server's JWT settings)
        "chat",  # read by charter.providers.config (providers, grace window, retention)
        "proposals",  # read by charter.proposals.service (kinds, appliers, who may decide)
        "artifacts",
        "readiness",
        "egress",
        "redaction",
        "policy",  # max_danger, disabled tools, per-agent enablement, ownership, scoped modes
        "audit",  # charter.deploy.audit_settings: the JSONL audit file
    }
)
_ARTIFACTS = frozenset(
    {
        "store",
        "root",
        "bucket",
        "prefix",
        "endpoint_url",
        "region",
        "quota_bytes",
        "quota_files",
        "max_upload_bytes",
        "expected_bucket_owner",
    }
)
_SECRETS = frozenset({"fingerprint_key", "ledger_key", "approval_token"})
# A principal's grant: a permission name, a namespace wildcard (``notes:*``) or ``*`` alone,
# which grants everything (a tool may not *require* ``*``: contracts use PERMISSION).
_GRANT = re.compile(rf"^(?:\*|{PERMISSION.pattern[1:-1]})$")
_PRINCIPAL = frozenset({"kind", "tenant", "permissions", "roles", "api_key", "description"})
_LIMITS = (
    frozenset(
        {
            "run_tool_calls",
            "run_elapsed_s",
            "context_tokens",
            "max_args_bytes",
            "session_idle_s",
            "renew_session_budgets",
            "run_metadata_retention_s",
        }
    )
    | KEYS
    | {HTTP_KEY, STREAMS_KEY}
)
_ROLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


def parse_deployment(
    data: Any, *, file: Path | str = DEPLOY_FILE, env: Mapping[str, str] = os.environ
) -> Deployment:
    """Validate a parsed deployment document and resolve its secrets from ``env`` and files."""
    r = _Reader(file)
    doc = r.mapping(data if data is not None else {}, "", _TOP)

    environment = r.string(doc.get("environment", "default"), "environment")
    mode_raw = doc.get("mode", Mode.ENFORCE.value)
    try:
        mode = Mode(mode_raw)
    except ValueError:
        raise r.fail("mode", "must be one of enforce, observe, off") from None

    refs: dict[str, SecretRef | None] = dict.fromkeys(_SECRETS)
    if "secrets" in doc:
        section = r.mapping(doc["secrets"], "secrets", _SECRETS)
        for key, value in section.items():
            ref = r.secret(value, f"secrets.{key}")
            assert isinstance(ref, SecretRef)
            ref.load(env, what=f"{file}: secrets.{key}")
            refs[key] = ref

    approval_lifetime = DEFAULT_APPROVAL_LIFETIME_S
    if "approvals" in doc:
        section = r.mapping(doc["approvals"], "approvals", frozenset({"lifetime_s"}))
        if "lifetime_s" in section:
            approval_lifetime = r.positive(section["lifetime_s"], "approvals.lifetime_s")
    context_lifetime = DEFAULT_CONTEXT_LIFETIME_S
    if "contexts" in doc:
        section = r.mapping(doc["contexts"], "contexts", frozenset({"lifetime_s"}))
        if "lifetime_s" in section:
            context_lifetime = r.positive(section["lifetime_s"], "contexts.lifetime_s")

    readiness_ttl, egress = remote_settings(doc, r.mapping, r.fail)

    limits = _limits(r, doc.get("limits"))
    artifacts = _artifact_settings(r, doc.get("artifacts"))
    principals, key_refs, key_digests = _principals(r, doc.get("principals"), file, env)
    # absent: python (tools that have a function run in-process); an explicit null: none,
    # so only tools named under bindings are bound
    default_executor: str | None = None if "default_executor" in doc else "python"
    if doc.get("default_executor") is not None:
        default_executor = _executor_kind(
            r, doc["default_executor"], "default_executor", kinds=_DEFAULT_EXECUTOR_KINDS
        )
    bindings = _bindings(r, doc.get("bindings"), env)

    enabled: frozenset[str] = frozenset()
    if doc.get("enable") is not None:
        enabled = r.names(doc["enable"], "enable", re.compile(TOOL_ID.pattern), "tool id")
    kill_switch = r.boolean(doc.get("kill_switch", False), "kill_switch")
    policy = parse_policy(r, doc.get("policy"))
    redaction = parse_redaction(r, doc.get("redaction"), env)
    audit = parse_audit(doc.get("audit"), file, r.mapping, r.fail)
    sections_secrets(doc, r, env)  # jwt and chat credentials: known to the redactor too

    token = refs["approval_token"]
    token_digest = hashlib.sha256(token.resolve()).digest() if token is not None else None
    if token_digest is not None:
        for name, digest in key_digests.items():
            if principals[name].kind is PrincipalKind.APPLICATION and hmac.compare_digest(
                digest, token_digest
            ):
                raise r.fail(
                    "secrets.approval_token",
                    f"must differ from every application credential; it equals the API key of "
                    f"application principal {name!r}",
                )
    for key in ("fingerprint_key", "ledger_key"):
        other_ref = refs[key]
        if other_ref is not None and token is not None and other_ref.resolve() == token.resolve():
            raise r.fail("secrets.approval_token", f"must differ from secrets.{key}")

    return Deployment(
        environment=environment,
        mode=mode,
        principals=MappingProxyType(principals),
        bindings=MappingProxyType(bindings),
        fingerprint_key=refs["fingerprint_key"],
        ledger_key=refs["ledger_key"],
        approval_token=token,
        approval_lifetime_s=approval_lifetime,
        context_lifetime_s=context_lifetime,
        readiness_ttl_s=readiness_ttl,
        egress=egress,
        limits=limits,
        artifacts=artifacts,
        enabled_tools=enabled,
        kill_switch=kill_switch,
        policy=policy,
        default_executor=default_executor,
        source=Path(file) if isinstance(file, Path) else None,
        credential_refs=MappingProxyType(key_refs),
        redaction=redaction,
        audit=audit,
        secret_refs=tuple(r.refs),
        _key_digests=MappingProxyType(key_digests),
        _token_digest=token_digest,
    )


def _artifact_settings(r: _Reader, value: Any) -> ArtifactSettings:
    if value is None:
        return ArtifactSettings()
    section = r.mapping(value, "artifacts", _ARTIFACTS)
    kind = section.get("store", "local")
    if kind not in ("local", "s3"):
        raise r.fail("artifacts.store", "must be local or s3")
    text = {
        k: r.string(section[k], f"artifacts.{k}")
        for k in ("root", "bucket", "prefix", "endpoint_url", "region", "expected_bucket_owner")
        if section.get(k) is not None
    }
    if kind == "s3" and "bucket" not in text:
        raise r.fail("artifacts.bucket", "is required when artifacts.store is s3")
    owner = text.get("expected_bucket_owner")
    if owner is not None and (
        kind != "s3" or not (len(owner) == 12 and owner.isascii() and owner.isdigit())
    ):
        raise r.fail(
            "artifacts.expected_bucket_owner", "must be a 12-digit AWS account id (S3 store only)"
        )
    quota = section.get("quota_bytes")
    quota_files = section.get("quota_files")
    upload = section.get("max_upload_bytes", _MAX_UPLOAD)
    return ArtifactSettings(
        store=kind,
        root=text.get("root"),
        bucket=text.get("bucket"),
        prefix=text.get("prefix", _S3_PREFIX),
        endpoint_url=text.get("endpoint_url"),
        region=text.get("region"),
        expected_bucket_owner=owner,
        quota_bytes=None
        if quota is None
        else int(r.positive(quota, "artifacts.quota_bytes", integer=True)),
        quota_files=None
        if quota_files is None
        else int(r.positive(quota_files, "artifacts.quota_files", integer=True)),
        max_upload_bytes=int(r.positive(upload, "artifacts.max_upload_bytes", integer=True)),
    )


def _limits(r: _Reader, value: Any) -> Limits:
    if value is None:
        return Limits()
    section = r.mapping(value, "limits", _LIMITS)
    base = Limits()

    def optional(key: str, current: float | None, *, integer: bool) -> float | None:
        if key not in section:
            return current
        if section[key] is None:
            return None
        return r.positive(section[key], f"limits.{key}", integer=integer)

    run_calls = optional("run_tool_calls", base.run_tool_calls, integer=True)
    run_elapsed = optional("run_elapsed_s", base.run_elapsed_s, integer=False)
    tokens = base.context_tokens
    if "context_tokens" in section:
        tokens = int(r.positive(section["context_tokens"], "limits.context_tokens", integer=True))
    args_bytes = base.max_args_bytes
    if "max_args_bytes" in section:
        args_bytes = int(
            r.positive(section["max_args_bytes"], "limits.max_args_bytes", integer=True)
        )
    idle = optional("session_idle_s", base.session_idle_s, integer=False)
    retention = optional("run_metadata_retention_s", None, integer=False)
    renew = base.renew_session_budgets
    if "renew_session_budgets" in section:
        renew = r.boolean(section["renew_session_budgets"], "limits.renew_session_budgets")
    return Limits(
        run_tool_calls=int(run_calls) if run_calls is not None else None,
        run_elapsed_s=run_elapsed,
        context_tokens=tokens,
        max_args_bytes=args_bytes,
        calls=call_limits(r, section),
        pending=pending_caps(r, section),
        policy_hook_deadline_s=hook_deadline_s(r, section),
        session_idle_s=idle,
        renew_session_budgets=renew,
        run_metadata_retention_s=retention,
        http=head_limits(r, section),
        streams=stream_limits(r, section),
    )


def _principals(
    r: _Reader, value: Any, file: Path | str, env: Mapping[str, str]
) -> tuple[dict[str, Principal], dict[str, str], dict[str, bytes]]:
    principals: dict[str, Principal] = {}
    refs: dict[str, str] = {}
    digests: dict[str, bytes] = {}
    if value is None:
        return principals, refs, digests
    if not isinstance(value, dict):
        raise r.fail("principals", "must be a mapping of principal name to its settings")
    for name, spec in value.items():
        if not isinstance(name, str) or not _PRINCIPAL_NAME.match(name):
            raise r.fail("principals", f"{name!r} is not a valid principal name")
        where = f"principals.{name}"
        spec = r.mapping(spec, where, _PRINCIPAL)
        if "tenant" not in spec:
            raise r.fail(_join(where, "tenant"), "is required: every principal belongs to a tenant")
        tenant = r.string(spec["tenant"], _join(where, "tenant"))
        if "kind" not in spec:
            raise r.fail(_join(where, "kind"), "is required: application or operator")
        try:
            kind = PrincipalKind(spec["kind"])
        except ValueError:
            raise r.fail(_join(where, "kind"), "must be application or operator") from None
        permissions = r.names(
            spec.get("permissions", []), _join(where, "permissions"), _GRANT, "permission"
        )
        roles = r.names(spec.get("roles", []), _join(where, "roles"), _ROLE, "role")
        if "api_key" in spec:
            key_where = _join(where, "api_key")
            key = r.secret(spec["api_key"], key_where, allow_hash=True)
            if isinstance(key, SecretRef):
                digest = hashlib.sha256(key.load(env, what=f"{file}: {key_where}")).digest()
                refs[name] = key.reference
            else:
                digest = bytes.fromhex(key)
                refs[name] = "sha256"
            for other, other_digest in digests.items():
                if hmac.compare_digest(other_digest, digest):
                    raise r.fail(key_where, f"is the same key as principals.{other}.api_key")
            digests[name] = digest
        principals[name] = Principal(
            name=name, tenant=tenant, kind=kind, permissions=permissions, roles=roles
        )
    return principals, refs, digests


def _executor_kind(
    r: _Reader, value: Any, where: str, *, kinds: frozenset[str] = EXECUTOR_KINDS
) -> str:
    if not isinstance(value, str) or value not in kinds:
        known = ", ".join(sorted(kinds))
        raise r.fail(where, f"unknown executor kind (known: {known})")
    return value


def _mcp_options(
    r: _Reader, spec: Mapping[str, Any], where: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """``executor: mcp``: a downstream MCP server, ``command: [argv…]`` (stdio) or ``url`` (+
    an optional bearer ``credential`` and, for https, an optional private ``ca``, read and
    checked as an ``executor: http`` binding's is); see docs/mcp.md."""
    if ("command" in spec) == ("url" in spec):
        raise r.fail(where, "executor: mcp needs exactly one of `command` or `url`")
    options: dict[str, Any] = {}
    if "command" in spec:
        command = spec["command"]
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(c, str) and c for c in command)
        ):
            raise r.fail(_join(where, "command"), "must be a non-empty list of strings (argv)")
        options["command"] = tuple(command)
        for key in ("credential", "ca"):
            if key in spec:
                raise r.fail(_join(where, key), "applies to `url` servers only")
    else:
        url = spec["url"]
        if not isinstance(url, str) or not HTTP_URL.match(url):
            raise r.fail(_join(where, "url"), "must be an http:// or https:// URL")
        options["url"] = url
        if "credential" in spec:
            ref = r.secret(spec["credential"], _join(where, "credential"))
            assert isinstance(ref, SecretRef)
            ref.load(env, what=f"{r.file}: {_join(where, 'credential')}")
            options["credential"] = ref
        if "ca" in spec:
            if not url.startswith("https://"):
                raise r.fail(_join(where, "ca"), "applies to https:// urls only")
            options["ca"] = certificate_authority(r, spec["ca"], _join(where, "ca"), env)
    if "cwd" in spec:
        options["cwd"] = r.string(spec["cwd"], _join(where, "cwd"))
    return options


def _bindings(r: _Reader, value: Any, env: Mapping[str, str] = os.environ) -> dict[str, Binding]:
    bindings: dict[str, Binding] = {}
    if value is None:
        return bindings
    if not isinstance(value, dict):
        raise r.fail("bindings", "must be a mapping of tool id to {executor: KIND}")
    for tool_id, spec in value.items():
        if not isinstance(tool_id, str) or not TOOL_ID.match(tool_id):
            raise r.fail("bindings", f"{tool_id!r} is not a tool id")
        where = f"bindings.{tool_id}"
        if not isinstance(spec, dict):
            raise r.fail(where, "must be a mapping like {executor: python}")
        if "executor" not in spec:
            raise r.fail(_join(where, "executor"), "is required")
        kind = _executor_kind(r, spec["executor"], _join(where, "executor"))
        allowed = frozenset({"executor", "required"}) | _BINDING_OPTIONS[kind]
        r.mapping(spec, where, allowed)
        required = r.boolean(spec.get("required", True), _join(where, "required"))
        if kind == "http":
            options = http_options(r, spec, where, env)
        elif kind == "mcp":
            options = _mcp_options(r, spec, where, env)
        else:
            options = {k: v for k, v in spec.items() if k not in ("executor", "required")}
        bindings[tool_id] = Binding(
            executor=kind, required=required, options=MappingProxyType(options)
        )
    return bindings


# ---------------------------------------------------------------------------------------
# Local development default


def local_default_deployment(project_dir: Path) -> Deployment:
    """The deployment used when no file exists: for development on one machine.

    - environment ``local``, mode ``enforce``;
    - one principal ``local``: an operator of tenant ``local`` granted ``*`` (everything,
      including approving); its API key is in ``.charter/operator.key``;
    - every tool runs in-process (``default_executor: python``) and is enabled (writes still
      need an approval);
    - the fingerprint and ledger keys are random keys in ``.charter/fingerprint.key`` and
      ``.charter/ledger.key``, created on first use with mode 0600 (never in the database).
    """
    keys = _local_keys(project_dir / LOCAL_DIR)
    fingerprint = SecretRef(file=keys["fingerprint_key"])
    ledger = SecretRef(file=keys["ledger_key"])
    operator_key = SecretRef(file=keys["operator_api_key"])
    for ref in (fingerprint, ledger, operator_key):
        ref.load(what="local development key")
    principal = Principal(
        name=LOCAL_OPERATOR,
        tenant=LOCAL_TENANT,
        kind=PrincipalKind.OPERATOR,
        permissions=frozenset({"*"}),
    )
    return Deployment(
        environment="local",
        mode=Mode.ENFORCE,
        principals=MappingProxyType({LOCAL_OPERATOR: principal}),
        bindings=MappingProxyType({}),
        fingerprint_key=fingerprint,
        ledger_key=ledger,
        approval_token=None,
        enabled_tools=None,
        default_executor="python",
        credential_refs=MappingProxyType({LOCAL_OPERATOR: operator_key.reference}),
        secret_refs=(operator_key,),
        _key_digests=MappingProxyType(
            {LOCAL_OPERATOR: hashlib.sha256(operator_key.resolve()).digest()}
        ),
    )


def _local_keys(directory: Path) -> dict[str, Path]:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {directory}: {exc.strerror}") from None
    paths = {}
    for name, filename in LOCAL_KEY_FILES.items():
        path = directory / filename
        _create_key_file(path)
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{path} must be a regular file")
        if mode & 0o077:
            raise ConfigError(
                f"{path} is readable by other users; restrict it with `chmod 600 {path}`"
            )
        paths[name] = path
    return paths


def _create_key_file(path: Path) -> None:
    """Create ``path`` with a fresh random key, mode 0600, atomically (first writer wins)."""
    if path.exists():
        return
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_urlsafe(32).encode("ascii") + b"\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)  # atomic: fails if another process created it first
    finally:
        temp.unlink(missing_ok=True)
