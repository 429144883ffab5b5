"""The deployment file: the shipped template, every refusal, secrets never echoed."""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import stat
import textwrap
from pathlib import Path
from typing import Any

import pytest

import charter.project
from charter.contracts.model import Effect
from charter.deploy.deployment import (
    DEPLOY_FILE,
    Binding,
    Mode,
    load_deployment,
    local_default_deployment,
    parse_deployment,
)
from charter.deploy.secret_ref import SecretRef
from charter.errors import ConfigError
from charter.kernel.principals import APPROVER_PERMISSION, Principal, PrincipalKind

from .conftest import CANARY

SHIPPED = Path(charter.project.__file__).parent / "templates" / "basic" / DEPLOY_FILE
# The example deployment with every secret given by environment variable (the production form).
TEMPLATE = Path(__file__).parent / "deploy_env.yaml"

ENV = {
    "CHARTER_FINGERPRINT_KEY": "fingerprint-key-0123456789",
    "CHARTER_LEDGER_KEY": "ledger-key-0123456789abcdef",
    "CHARTER_APPROVAL_TOKEN": "approval-token-0123456789",
    "CHARTER_KEY_ALICE": "alice-key-0123456789abcdef",
    "CHARTER_KEY_APP": CANARY,
    "CHARTER_KEY_INTRUDER": "intruder-key-0123456789abc",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / DEPLOY_FILE
    path.write_text(textwrap.dedent(text))
    return path


def parse(text: str, env: dict[str, str] | None = None) -> Any:
    import yaml

    return parse_deployment(yaml.safe_load(textwrap.dedent(text)), env=ENV if env is None else env)


# --- the shipped template ---------------------------------------------------------------


def test_the_shipped_template_loads(tmp_path: Path) -> None:
    deployment = load_deployment(TEMPLATE, project_dir=tmp_path, env=ENV)
    assert deployment.environment == "local"
    assert deployment.mode is Mode.ENFORCE
    assert set(deployment.principals) == {"alice", "app", "intruder"}
    alice = deployment.principals["alice"]
    assert (alice.kind, alice.tenant) == (PrincipalKind.OPERATOR, "acme")
    assert alice.can_approve
    app = deployment.principals["app"]
    assert app.kind is PrincipalKind.APPLICATION
    assert not app.can_approve
    assert deployment.principals["intruder"].tenant == "globex"
    assert deployment.bindings["notes.add"] == Binding(executor="python")
    assert deployment.approval_lifetime_s == 300
    assert deployment.context_lifetime_s == 900
    assert deployment.fingerprint_key is not None
    assert deployment.fingerprint_key.resolve() == ENV["CHARTER_FINGERPRINT_KEY"].encode()
    assert deployment.ledger_key is not None
    assert deployment.ledger_key.key_id().startswith("k")
    assert deployment.authenticate(CANARY) == app
    assert deployment.authenticate(ENV["CHARTER_KEY_ALICE"]) == alice
    assert deployment.authenticate("not-a-key") is None
    assert deployment.approval_token_matches(ENV["CHARTER_APPROVAL_TOKEN"])
    assert not deployment.approval_token_matches(CANARY)
    assert not deployment.approval_token_matches("")


def test_the_template_charter_init_writes_loads_with_its_dev_secrets(tmp_path: Path) -> None:
    from charter.project.init import init_project

    init_project(tmp_path / "demo")
    deployment = load_deployment(None, project_dir=tmp_path / "demo", env={})
    assert deployment.source == tmp_path / "demo" / DEPLOY_FILE
    assert set(deployment.principals) == {"alice", "app", "intruder"}
    assert deployment.is_enabled("notes.add", Effect.WRITE)
    secrets_dir = tmp_path / "demo" / ".charter" / "secrets"
    app_key = (secrets_dir / "app.key").read_text().strip()
    assert deployment.authenticate(app_key) == deployment.principals["app"]
    for path in secrets_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert SHIPPED.read_text().count("{file: .charter/secrets/") == 6


def test_file_is_found_beside_the_project_or_through_the_environment(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / DEPLOY_FILE).write_text(TEMPLATE.read_text())
    assert load_deployment(None, project_dir=project, env=ENV).source == project / DEPLOY_FILE
    other = tmp_path / "prod.yaml"
    other.write_text("environment: prod\n")
    env = {**ENV, "CHARTER_DEPLOY": str(other)}
    assert load_deployment(None, project_dir=project, env=env).environment == "prod"
    with pytest.raises(ConfigError, match="not found"):
        load_deployment(tmp_path / "missing.yaml", project_dir=project, env=ENV)


def test_missing_environment_variable_names_the_field_and_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in ENV.items() if k != "CHARTER_LEDGER_KEY"}
    with pytest.raises(ConfigError) as info:
        load_deployment(TEMPLATE, project_dir=tmp_path, env=env)
    assert "secrets.ledger_key" in str(info.value)
    assert "CHARTER_LEDGER_KEY" in str(info.value)


def test_everything_optional_has_a_default() -> None:
    deployment = parse("environment: dev\n")
    assert deployment.mode is Mode.ENFORCE
    assert deployment.principals == {}
    assert deployment.fingerprint_key is None
    assert deployment.limits.context_tokens > 0
    assert deployment.enabled_tools == frozenset()


def test_full_file_with_limits_enablement_hashes_and_files(tmp_path: Path) -> None:
    (tmp_path / "ledger.key").write_text("ledger-key-from-a-file-0123\n")
    key_hash = hashlib.sha256(b"ops-key-0123456789abcdef").hexdigest()
    path = write(
        tmp_path,
        f"""
        environment: staging
        mode: observe
        secrets:
          ledger_key: {{file: ledger.key}}
        approvals: {{lifetime_s: 60}}
        contexts: {{lifetime_s: 120.5}}
        limits: {{run_tool_calls: 10, run_elapsed_s: null, context_tokens: 500,
                  max_args_bytes: 2048}}
        enable: [notes.add]
        kill_switch: false
        default_executor: subprocess
        principals:
          ops:
            kind: operator
            tenant: acme
            roles: [oncall]
            permissions: ["notes:*", approvals:approve]
            api_key: {{sha256: {key_hash.upper()}}}
        bindings:
          notes.search: {{executor: subprocess, required: false}}
        """,
    )
    deployment = load_deployment(path, project_dir=tmp_path, env={})
    assert deployment.mode is Mode.OBSERVE
    assert deployment.ledger_key is not None
    assert deployment.ledger_key.resolve() == b"ledger-key-from-a-file-0123"
    assert (deployment.approval_lifetime_s, deployment.context_lifetime_s) == (60, 120.5)
    assert deployment.limits.run_tool_calls == 10
    assert deployment.limits.run_elapsed_s is None
    assert (deployment.limits.context_tokens, deployment.limits.max_args_bytes) == (500, 2048)
    ops = deployment.principals["ops"]
    assert ops.roles == {"oncall"}
    assert ops.has("notes:write")
    assert ops.has("notes:items:delete")
    assert not ops.has("files:x")
    assert deployment.authenticate("ops-key-0123456789abcdef") == ops
    assert deployment.bindings["notes.search"] == Binding(executor="subprocess", required=False)
    assert deployment.binding_for("notes.get") == Binding(executor="subprocess")
    assert deployment.is_enabled("notes.add", Effect.WRITE)
    assert not deployment.is_enabled("notes.delete", Effect.WRITE)
    assert not deployment.is_enabled("notes.propose", "proposal")
    assert deployment.is_enabled("notes.search", Effect.READ)


def test_call_limits_are_read_with_their_defaults() -> None:
    from charter.kernel.limits import LimitSettings, PendingCaps, Rate

    plain = parse("environment: x\n")
    assert plain.limits.calls == LimitSettings()
    assert not plain.limits.calls.enabled
    assert plain.limits.pending == PendingCaps(tenant=1000, principal=100)
    assert plain.limits.policy_hook_deadline_s == 0.25
    full = parse(
        "limits:\n"
        "  rate: {principal: {per_s: 10, burst: 20}, tenant: {per_s: 2.5},\n"
        "         tools: {kv.put: {per_s: 1, burst: 5}}}\n"
        "  concurrency: {principal: 8, tenant: 32, tools: {kv.put: 2}}\n"
        "  pending_approvals: {tenant: null, principal: 7}\n"
        "  policy_hook_deadline_ms: 500\n"
        "  refusal_audit_interval_s: 5\n"
    )
    calls = full.limits.calls
    assert calls.rate_principal == Rate(per_s=10, burst=20)
    assert calls.rate_tenant == Rate(per_s=2.5, burst=2)
    assert calls.rate_tools == {"kv.put": Rate(per_s=1, burst=5)}
    assert (calls.concurrency_principal, calls.concurrency_tenant) == (8, 32)
    assert calls.concurrency_tools == {"kv.put": 2}
    assert calls.audit_interval_s == 5
    assert full.limits.pending == PendingCaps(tenant=None, principal=7)
    assert full.limits.policy_hook_deadline_s == 0.5


def test_stream_limits_are_read_with_their_defaults() -> None:
    from charter.deploy.stream_limits import StreamLimits

    assert parse("environment: x\n").limits.streams == StreamLimits(tenant=100, principal=20)
    assert parse("limits: {streams: null}\n").limits.streams == StreamLimits()
    some = parse("limits: {streams: {principal: 5}}\n").limits.streams
    assert some == StreamLimits(tenant=100, principal=5)
    lifted = parse("limits: {streams: {tenant: null, principal: null}}\n").limits.streams
    assert lifted == StreamLimits(tenant=None, principal=None)
    assert parse("environment: x\n").describe()["limits"]["streams"] == {
        "tenant": 100,
        "principal": 20,
    }


def test_kill_switch_disables_every_tool() -> None:
    deployment = parse("kill_switch: true\nenable: [notes.add]\n")
    assert not deployment.is_enabled("notes.search", Effect.READ)
    assert not deployment.is_enabled("notes.add", Effect.WRITE)


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("colour: blue\n", "colour", "unknown field"),
        (
            "secrets: {fingerprint_key: {env: X}, extra: {env: Y}}\n",
            "secrets.extra",
            "unknown field",
        ),
        (
            "principals: {a: {kind: operator, tenant: t, apikey: {env: X}}}\n",
            "principals.a.apikey",
            "unknown field",
        ),
        ("principals: {a: {kind: operator, permissions: [x]}}\n", "principals.a.tenant", "tenant"),
        ("principals: {a: {kind: operator, tenant: ''}}\n", "principals.a.tenant", "non-empty"),
        ("principals: {a: {tenant: t}}\n", "principals.a.kind", "required"),
        (
            "principals: {a: {tenant: t, kind: robot}}\n",
            "principals.a.kind",
            "application or operator",
        ),
        (
            "principals: {a: {tenant: t, kind: operator, permissions: ['bad perm']}}\n",
            "principals.a.permissions[0]",
            "not a valid permission",
        ),
        (
            "bindings: {notes.add: {executor: ftp}}\n",
            "bindings.notes.add.executor",
            "unknown executor kind",
        ),
        (
            "bindings: {notes.add: {executor: python, url: 'http://x'}}\n",
            "bindings.notes.add.url",
            "unknown field",
        ),
        ("bindings: {notes.add: {}}\n", "bindings.notes.add.executor", "required"),
        ("default_executor: ftp\n", "default_executor", "unknown executor kind"),
        ("mode: strict\n", "mode", "enforce, observe, off"),
        ("approvals: {lifetime_s: 0}\n", "approvals.lifetime_s", "positive"),
        ("contexts: {lifetime_s: -1}\n", "contexts.lifetime_s", "positive"),
        ("limits: {run_tool_calls: 1.5}\n", "limits.run_tool_calls", "positive integer"),
        ("limits: {tokens: 5}\n", "limits.tokens", "unknown field"),
        ("enable: notes.add\n", "enable", "list"),
        ("kill_switch: 'yes'\n", "kill_switch", "true or false"),
        ("artifacts: {quota_files: 0}\n", "artifacts.quota_files", "positive"),
        ("limits: {rate: {user: {per_s: 1}}}\n", "limits.rate.user", "unknown field"),
        ("limits: {rate: {principal: {burst: 3}}}\n", "limits.rate.principal.per_s", "required"),
        ("limits: {rate: {tenant: {per_s: 0}}}\n", "limits.rate.tenant.per_s", "positive"),
        (
            "limits: {rate: {tools: {kv.get: {per_s: 1, burst: 1.5}}}}\n",
            "limits.rate.tools.kv.get.burst",
            "positive integer",
        ),
        ("limits: {concurrency: {principal: -1}}\n", "limits.concurrency.principal", "positive"),
        ("limits: {concurrency: {tools: [a]}}\n", "limits.concurrency.tools", "mapping"),
        (
            "limits: {pending_approvals: {tenant: 0}}\n",
            "limits.pending_approvals.tenant",
            "positive",
        ),
        ("limits: {policy_hook_deadline_ms: 0}\n", "limits.policy_hook_deadline_ms", "positive"),
        ("limits: {streams: {tenant: 0}}\n", "limits.streams.tenant", "positive integer"),
        ("limits: {streams: {principal: 2.5}}\n", "limits.streams.principal", "positive integer"),
        ("limits: {streams: {principal: true}}\n", "limits.streams.principal", "positive"),
        ("limits: {streams: {user: 3}}\n", "limits.streams.user", "unknown field"),
        ("limits: {streams: 50}\n", "limits.streams", "must be a mapping"),
        (
            "artifacts: {store: s3, bucket: b-1, expected_bucket_owner: '12345'}\n",
            "artifacts.expected_bucket_owner",
            "12-digit",
        ),
        (
            "artifacts: {expected_bucket_owner: '123456789012'}\n",
            "artifacts.expected_bucket_owner",
            "S3 store only",
        ),
        ("secrets: {ledger_key: {env: X, file: y}}\n", "secrets.ledger_key", "exactly one"),
        ("secrets: {ledger_key: {sha256: abc}}\n", "secrets.ledger_key.sha256", "unknown field"),
        (
            "principals: {a: {kind: operator, tenant: t, api_key: {sha256: abc}}}\n",
            "principals.a.api_key.sha256",
            "64 hexadecimal",
        ),
    ],
)
def test_each_refusal_names_its_field(text: str, where: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    assert f"{where}:" in message
    assert says in message


@pytest.mark.parametrize(
    "text",
    [
        f"principals: {{a: {{kind: application, tenant: t, api_key: {CANARY}}}}}\n",
        f"principals: {{a: {{kind: application, tenant: t, api_key: '{CANARY}'}}}}\n",
        f"secrets: {{fingerprint_key: {CANARY}}}\n",
        f"secrets: {{approval_token: '{CANARY}'}}\n",
    ],
)
def test_inline_secrets_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert "inline secrets are not allowed" in str(info.value)
    assert "{env: VAR}" in str(info.value)
    assert CANARY not in str(info.value)


def test_approval_token_equal_to_an_application_key_is_refused() -> None:
    env = {**ENV, "CHARTER_APPROVAL_TOKEN": CANARY}  # same value as CHARTER_KEY_APP
    with pytest.raises(ConfigError) as info:
        load_deployment(TEMPLATE, project_dir=Path("."), env=env)
    assert "secrets.approval_token" in str(info.value)
    assert "application principal 'app'" in str(info.value)
    assert CANARY not in str(info.value)


def test_approval_token_equal_to_a_hashed_application_key_is_refused() -> None:
    text = f"""
        secrets: {{approval_token: {{env: TOKEN}}}}
        principals:
          app: {{kind: application, tenant: t,
                 api_key: {{sha256: {hashlib.sha256(CANARY.encode()).hexdigest()}}}}}
        """
    with pytest.raises(ConfigError, match="application principal 'app'") as info:
        parse(text, {"TOKEN": CANARY})
    assert CANARY not in str(info.value)


def test_two_principals_with_one_key_are_refused() -> None:
    text = """
        principals:
          a: {kind: application, tenant: t, api_key: {env: K1}}
          b: {kind: application, tenant: t, api_key: {env: K2}}
        """
    with pytest.raises(ConfigError, match=r"principals\.b\.api_key: is the same key"):
        parse(text, {"K1": CANARY, "K2": CANARY})


def test_short_secrets_are_refused() -> None:
    with pytest.raises(ConfigError, match="shorter than 16 bytes"):
        parse("secrets: {ledger_key: {env: K}}\n", {"K": "short"})


def test_yaml_errors_do_not_echo_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, f'principals: {{a: {{api_key: "{CANARY}}}}}\n')
    with pytest.raises(ConfigError, match="invalid YAML") as info:
        load_deployment(path, project_dir=tmp_path, env=ENV)
    assert CANARY not in str(info.value)
    dup = write(tmp_path, "mode: enforce\nmode: off\n")
    with pytest.raises(ConfigError, match="duplicate key 'mode'"):
        load_deployment(dup, project_dir=tmp_path, env=ENV)


# --- secrets are never echoed -----------------------------------------------------------


def test_canary_secret_never_appears_in_repr_describe_logs_or_pickles(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {
        **ENV,
        "CHARTER_LEDGER_KEY": CANARY + "-ledger",
        "CHARTER_APPROVAL_TOKEN": CANARY + "-token",
    }
    with caplog.at_level(logging.DEBUG):
        deployment = load_deployment(TEMPLATE, project_dir=tmp_path, env=env)
        logging.getLogger("test").info("loaded %r / %s", deployment, deployment.ledger_key)
    outputs = [
        repr(deployment),
        str(deployment),
        json.dumps(deployment.describe()),
        repr(deployment.ledger_key),
        str(deployment.approval_token),
        caplog.text,
        repr(pickle.loads(pickle.dumps(deployment.ledger_key))),
    ]
    for text in outputs:
        assert CANARY not in text
    assert CANARY.encode() not in pickle.dumps(deployment.ledger_key)
    described = deployment.describe()
    assert described["secrets"]["ledger_key"] == "env:CHARTER_LEDGER_KEY"
    assert described["principals"]["app"]["api_key"] == "env:CHARTER_KEY_APP"


def test_secret_ref_needs_exactly_one_source() -> None:
    with pytest.raises(ConfigError):
        SecretRef()
    with pytest.raises(ConfigError):
        SecretRef(env="A", file="b")
    with pytest.raises(ConfigError):
        SecretRef(env="not a name")
    assert SecretRef(env="A") == SecretRef(env="A")


# --- principals -------------------------------------------------------------------------


def test_principal_permissions_and_wildcards() -> None:
    p = Principal(
        name="p",
        tenant="t",
        kind=PrincipalKind.APPLICATION,
        permissions=frozenset({"notes:read", "files:*", APPROVER_PERMISSION}),
    )
    assert p.has("notes:read")
    assert not p.has("notes:write")
    assert p.has("files:read")
    assert p.has("files:deep:write")
    assert not p.has("files")
    assert not p.has("notes:*")  # a required wildcard matches only the same grant
    assert not p.can_approve  # an application never approves
    root = Principal(
        name="r", tenant="t", kind=PrincipalKind.OPERATOR, permissions=frozenset({"*"})
    )
    assert root.has("anything:at:all")
    assert root.can_approve


# --- the local default ------------------------------------------------------------------


def test_local_default_creates_private_key_files_once(tmp_path: Path) -> None:
    first = local_default_deployment(tmp_path)
    keys = sorted((tmp_path / ".charter").glob("*.key"))
    assert [k.name for k in keys] == ["fingerprint.key", "ledger.key", "operator.key"]
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / ".charter").stat().st_mode) == 0o700
    second = load_deployment(None, project_dir=tmp_path, env={})
    assert first.ledger_key is not None
    assert second.ledger_key is not None
    assert first.ledger_key.resolve() == second.ledger_key.resolve()
    operator = second.principals["local"]
    assert operator.can_approve
    assert operator.tenant == "local"
    api_key = (tmp_path / ".charter" / "operator.key").read_text().strip()
    assert second.authenticate(api_key) == operator
    assert second.binding_for("any.tool") == Binding(executor="python")
    assert second.is_enabled("any.tool", Effect.WRITE)
    assert api_key not in repr(second)
    assert api_key not in json.dumps(second.describe())


def test_local_default_refuses_a_key_file_others_can_read(tmp_path: Path) -> None:
    local_default_deployment(tmp_path)
    (tmp_path / ".charter" / "ledger.key").chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        local_default_deployment(tmp_path)


def test_the_documented_example_loads(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
    text = docs.read_text()
    example = text.split("## A complete example", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    (tmp_path / "ledger.key").write_text("ledger-key-from-a-file-0123\n")
    example = example.replace("/run/secrets/charter-ledger-key", str(tmp_path / "ledger.key"))
    example = example.replace("/var/log/charter/", f"{tmp_path}/")
    path = write(tmp_path, example)
    env = {**ENV, "PARTNER_TOKEN": "partner-token-0123456789"}
    deployment = load_deployment(path, project_dir=tmp_path, env=env)
    assert deployment.environment == "production"
    assert "partner-token-0123456789" in deployment.known_secrets()
    assert deployment.authenticate("charter-docs-example-key") == deployment.principals["alice"]
    assert deployment.binding_for("notes.add") == Binding(executor="subprocess")
    assert deployment.audit.file == tmp_path / "audit.jsonl"


def _documented_defaults(page: str = "deploy.md") -> dict[str, str]:
    """``docs/deploy.md``'s table rows as {field: default cell}, the first row naming a field
    with a default of its own winning (``a` / `.b`` names ``a`` and its sibling ``b``)."""
    import re

    docs = Path(__file__).resolve().parents[2] / "docs" / page
    found: dict[str, str] = {}
    for line in docs.read_text().splitlines():
        line = line.strip()
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0].split(" — ")[0])
        defaults = [d.strip().strip("`") for d in cells[1].split(" / ")]
        full: list[str] = []
        for name in names:
            if name.startswith(".") and full:
                name = full[-1].rsplit(".", 1)[0] + name
            full.append(name)
        for i, name in enumerate(full):
            default = defaults[i] if len(defaults) == len(full) else defaults[0]
            if not default.startswith("see ") and name not in found:
                found[name] = default
    return found


def test_deploy_md_documents_every_limit_with_its_default() -> None:
    """Every limit field the deployment parser accepts is in docs/deploy.md with the default
    the code has (issue 20): ``limits.*``, the pending-approval caps and the artifact quotas."""
    from charter.artifacts.local import DEFAULT_QUOTA_BYTES
    from charter.artifacts.usage import DEFAULT_QUOTA_FILES
    from charter.deploy.deployment import _ARTIFACTS, _LIMITS, ArtifactSettings, Limits
    from charter.deploy.http_limits import HeadLimits
    from charter.deploy.stream_limits import StreamLimits
    from charter.kernel.limits import LimitSettings, PendingCaps

    def shown(value: object) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    limits, caps, calls = Limits(), PendingCaps(), LimitSettings()
    code: dict[str, str] = {
        f"limits.{key}": shown(getattr(limits, key))
        for key in _LIMITS
        if key in Limits.__dataclass_fields__ and key not in {"http", "streams"}
    }
    head, streams = HeadLimits(), StreamLimits()
    code |= {f"limits.http.{k}": shown(v) for k, v in head.describe().items()}
    code |= {f"limits.streams.{k}": shown(v) for k, v in streams.describe().items()}
    code |= {
        "limits.rate.*": "none" if calls.rate_principal is None else "?",
        "limits.concurrency.*": "none" if calls.concurrency_principal is None else "?",
        "limits.pending_approvals.tenant": shown(caps.tenant),
        "limits.pending_approvals.principal": shown(caps.principal),
        "limits.policy_hook_deadline_ms": shown(limits.policy_hook_deadline_s * 1000),
        "limits.refusal_audit_interval_s": shown(calls.audit_interval_s),
        "artifacts.quota_bytes": shown(DEFAULT_QUOTA_BYTES),
        "artifacts.quota_files": shown(DEFAULT_QUOTA_FILES),
        "artifacts.max_upload_bytes": "100 MiB",
        "artifacts.expected_bucket_owner": "none",
    }
    assert ArtifactSettings().max_upload_bytes == 100 * 1024 * 1024
    limit_keys = {"rate", "concurrency", "pending_approvals", "http", "streams"}
    parsed = (
        {f"limits.{k}" for k in _LIMITS - limit_keys}
        | {f"limits.http.{k}" for k in head.describe()}
        | {f"limits.streams.{k}" for k in streams.describe()}
        | {
            "limits.rate.*",
            "limits.concurrency.*",
            "limits.pending_approvals.tenant",
            "limits.pending_approvals.principal",
        }
    )
    parsed |= {
        f"artifacts.{k}"
        for k in _ARTIFACTS
        if k in {"quota_bytes", "quota_files", "max_upload_bytes", "expected_bucket_owner"}
    }
    assert parsed == set(code), "a limit field without an expected default here"
    documented = _documented_defaults()
    missing = sorted(parsed - set(documented))
    assert not missing, f"limits docs/deploy.md does not list: {missing}"
    assert {name: documented[name] for name in parsed} == code


def test_deploy_md_documents_every_http_binding_field_with_its_default() -> None:
    """Every field an ``executor: http`` binding accepts is a ``bindings.TOOL_ID.*`` row of
    docs/deploy.md with the default the code has (``ca`` included)."""
    from charter.deploy.http_binding import HTTP_FIELDS
    from charter.executors.http import HttpEndpoint

    endpoint = HttpEndpoint(url="https://x", credential=b"", signing_key=b"")
    code = {
        "executor": "none (required)",
        "required": str(Binding(executor="python").required).lower(),
        "url": "none (required)",
        "credential": "none (required)",
        "signing_key": "none (required)",
        "timeout_s": "none" if endpoint.timeout_s is None else str(endpoint.timeout_s),
        "max_response_bytes": str(endpoint.max_response_bytes),
        "ca": "none" if endpoint.ca is None else "?",
    }
    assert set(code) == HTTP_FIELDS | {"executor", "required"}, "a field without a default here"
    prefix = "bindings.TOOL_ID."
    documented = {
        name.removeprefix(prefix): default
        for name, default in _documented_defaults().items()
        if name.startswith(prefix)
    }
    assert documented == code


def test_mcp_md_documents_every_mcp_binding_field_with_its_default() -> None:
    """Every field an ``executor: mcp`` binding accepts is a ``bindings.TOOL_ID.*`` row of
    docs/mcp.md's table with the default the code has; ``ca`` is also deploy.md's row."""
    from charter.deploy.deployment import _BINDING_OPTIONS
    from charter.executors.mcp import McpServerSpec, spec_from_options

    project = Path("/srv/project")
    stdio = spec_from_options({"command": ["server"]}, root=project)
    remote = McpServerSpec(url="https://x")
    code = {
        "command": "none" if remote.command is None else "?",
        "url": "none" if stdio.url is None else "?",
        "credential": "none" if remote.credential is None else "?",
        "cwd": "the project directory" if stdio.cwd == project else "?",
        "ca": "none" if remote.ca is None else "?",
    }
    assert set(code) == _BINDING_OPTIONS["mcp"], "a field without a default here"
    prefix = "bindings.TOOL_ID."
    documented = {
        name.removeprefix(prefix): default
        for name, default in _documented_defaults("mcp.md").items()
        if name.startswith(prefix)
    }
    assert documented == code
    assert "`http` or `mcp`" in _deploy_row("ca"), "deploy.md's ca row names mcp bindings"


def _deploy_row(field: str) -> str:
    docs = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
    (row,) = [
        line
        for line in docs.read_text().splitlines()
        if line.startswith(f"| `bindings.TOOL_ID.{field}` |")
    ]
    return row


# --- audit: the JSONL audit file -----------------------------------------------------------


def test_audit_file_is_relative_to_the_deployment_file(tmp_path: Path) -> None:
    from charter.kernel.audit import FsyncPolicy

    (tmp_path / "conf" / "logs").mkdir(parents=True)
    path = tmp_path / "conf" / DEPLOY_FILE
    path.write_text("audit: {file: logs/audit.jsonl, fsync: never}\n")
    deployment = load_deployment(path, project_dir=tmp_path, env=ENV)
    assert deployment.audit.file == tmp_path / "conf" / "logs" / "audit.jsonl"
    assert deployment.audit.fsync is FsyncPolicy.NEVER
    assert deployment.describe()["audit"] == {
        "file": str(tmp_path / "conf" / "logs" / "audit.jsonl"),
        "fsync": "never",
    }
    assert not deployment.audit.file.exists()  # loading (charter check) creates nothing
    none = load_deployment(write(tmp_path, "{}\n"), project_dir=tmp_path, env=ENV)
    assert none.audit.file is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("audit: {file: missing/audit.jsonl}", "audit.file: directory .*missing does not exist"),
        ("audit: {file: ''}", "audit.file: must be a file path"),
        ("audit: {file: [a]}", "audit.file: must be a file path"),
        ("audit: {file: a.jsonl, rotate: daily}", r"audit.rotate: unknown field \(known: file"),
        ("audit: {fsync: sometimes}", "audit.fsync: must be always or never"),
        ("audit: {file: adir}", "audit.file: .*adir is not a regular file"),
        ("audit: /var/log/audit.jsonl", "audit: must be a mapping"),
    ],
)
def test_bad_audit_settings_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(ConfigError, match=message):
        load_deployment(write(tmp_path, text + "\n"), project_dir=tmp_path, env=ENV)


def test_every_template_turns_the_audit_file_on() -> None:
    templates = Path(charter.project.__file__).parent / "templates"
    for template in sorted(templates.iterdir()):
        text = (template / DEPLOY_FILE).read_text()
        assert "\naudit: {file: .charter/audit.jsonl}\n" in text, template.name


def test_deploy_md_documents_the_audit_fields_with_their_defaults() -> None:
    from charter.deploy.audit_settings import KEYS, AuditSettings

    settings = AuditSettings()
    code = {
        "audit.file": "none" if settings.file is None else "?",
        "audit.fsync": settings.fsync.value,
    }
    assert {f"audit.{key}" for key in KEYS} == set(code)
    documented = _documented_defaults()
    assert {name: documented.get(name) for name in code} == code
