"""Every form of a known secret: encodings, keys, streams, log records, the redaction section."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from charter.deploy.deployment import local_default_deployment, parse_deployment
from charter.errors import ConfigError
from charter.kernel.redaction import (
    REDACTED,
    RedactingLogFilter,
    Redactor,
    StreamRedactor,
    secret_forms,
)

SECRET = "s3cr3t/Zq+x=9f8e7d6c5b4a?&w"


def scrubbed(redactor: Redactor, text: str) -> bool:
    return SECRET not in redactor.redact_text(text) and not any(
        form in redactor.redact_text(text) for form in secret_forms(SECRET)
    )


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s,
        lambda s: urllib.parse.quote(s, safe=""),
        lambda s: urllib.parse.quote(s),
        lambda s: urllib.parse.quote_plus(s),
        lambda s: re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(s, safe="")),
        lambda s: base64.b64encode(s.encode()).decode(),
        lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
        lambda s: base64.b64encode(s.encode()).decode().rstrip("="),
        lambda s: json.dumps(s)[1:-1],
        lambda s: "".join(f"\\u{ord(c):04x}" for c in s),
        lambda s: "".join(f"\\u{ord(c):04X}" for c in s),
        lambda s: json.dumps(s, ensure_ascii=True).replace("s", "\\u0073")[1:-1],  # mixed
    ],
    ids=[
        "plain",
        "percent",
        "percent-path",
        "percent-plus",
        "percent-lower",
        "base64",
        "base64url",
        "base64-unpadded",
        "json",
        "json-u-lower",
        "json-u-upper",
        "json-u-mixed",
    ],
)
def test_a_remembered_secret_is_scrubbed_in_every_form(encode: Any) -> None:
    redactor = Redactor().remember([SECRET])
    text = f"GET https://api.example/v1?x=1&key={encode(SECRET)}&y=2"
    out = redactor.redact_text(text)
    assert encode(SECRET) not in out
    assert SECRET not in urllib.parse.unquote(out)
    assert "https://api.example/v1" in out or out == REDACTED


@pytest.mark.parametrize("prefix", ["", "u", "us", "use", "user:", "basic-auth "])
@pytest.mark.parametrize("encoder", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_inside_a_longer_text_at_every_alignment(prefix: str, encoder: Any) -> None:
    redactor = Redactor().remember([SECRET])
    blob = encoder(f"{prefix}{SECRET} and more".encode()).decode()
    out = redactor.redact_text(f"Authorization-ish: {blob}")
    assert REDACTED in out
    for cut in range(len(out)):  # what is left decodes to no more than a fragment
        piece = out[cut:].split(REDACTED)[0]
        assert SECRET not in piece
    assert encoder(SECRET.encode()).decode().rstrip("=")[:8] not in out.replace(REDACTED, "")


def test_values_keys_and_longer_strings_at_any_depth() -> None:
    redactor = Redactor().remember([SECRET])
    doc = {
        "outer": [{SECRET: 1, f"x-{SECRET}": 2, "note": f"the key is {SECRET}!"}],
        "url": f"https://h/p?token={urllib.parse.quote(SECRET, safe='')}",
        SECRET: {"nested": SECRET},
    }
    out = redactor.redact(doc)
    text = json.dumps(out)
    assert SECRET not in text
    assert urllib.parse.quote(SECRET, safe="") not in text
    assert out["outer"][0][REDACTED] == 1
    assert out["outer"][0][f"x-{REDACTED}"] == 2
    assert out[REDACTED] == {"nested": REDACTED}
    # two keys that redact to the same name both survive
    both = redactor.redact({SECRET: 1, REDACTED: 2})
    assert sorted(both.values()) == [1, 2]


def test_configured_key_names_hide_values_and_make_them_known() -> None:
    redactor = Redactor(keys=["session-id", "PIN"])
    args = {"Session_ID": "abcd-1234-efgh", "pin": 123456, "other": "x abcd-1234-efgh"}
    assert redactor.is_sensitive_key("X-Session-Id")
    out = redactor.remember(redactor.secret_values(args)).redact(args)
    assert out == {"Session_ID": REDACTED, "pin": REDACTED, "other": f"x {REDACTED}"}


def test_a_secret_split_across_stream_pieces_is_never_emitted() -> None:
    redactor = Redactor().remember([SECRET])
    for split in range(1, len(SECRET)):
        stream = StreamRedactor(redactor)
        pieces = ["Here it is: ", SECRET[:split], SECRET[split:], " — done."]
        emitted = [stream.feed(p) for p in pieces] + [stream.flush()]
        joined = "".join(emitted)
        assert SECRET not in joined
        assert joined == f"Here it is: {REDACTED} — done."
        for piece in emitted:
            assert not any(piece.endswith(SECRET[:k]) for k in range(4, len(SECRET)))


def test_stream_redactor_without_secrets_holds_nothing_back() -> None:
    stream = StreamRedactor(Redactor())
    assert stream.feed("hello ") == "hello "
    assert stream.pending == 0


def test_stream_redactor_catches_the_base64_form_split_too() -> None:
    redactor = Redactor().remember([SECRET])
    encoded = base64.b64encode(SECRET.encode()).decode()
    stream = StreamRedactor(redactor)
    joined = stream.feed("b64=" + encoded[:10]) + stream.feed(encoded[10:] + " end")
    joined += stream.flush()
    assert encoded.rstrip("=") not in joined
    assert REDACTED in joined


def test_log_filter_scrubs_third_party_records_arguments_and_tracebacks() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    handler.addFilter(RedactingLogFilter(Redactor().remember([SECRET])))
    logger = logging.getLogger("httpx.test-secret-forms")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        logger.debug("HTTP Request: GET %s", f"https://h/?k={urllib.parse.quote(SECRET)}")
        logger.info("body %r", {"api_key": "zzzz-unrelated", "echo": SECRET})
        try:
            raise RuntimeError(f"failed with {SECRET}")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert "HTTP Request: GET https://h/?k=" in text
    assert "failed with" in text
    assert "RuntimeError" in text
    assert SECRET not in text
    assert urllib.parse.quote(SECRET) not in text
    assert "zzzz-unrelated" not in text  # the api_key=... text rule


# --- the deployment's redaction section ----------------------------------------------------

ENV = {"TOKEN_IN_URLS": "tok-0123456789abcdef-url", "UPSTREAM_KEY": "upstream-key-0123456789"}


def parse(text: str, env: dict[str, str] | None = None) -> Any:
    return parse_deployment(yaml.safe_load(textwrap.dedent(text)), env=ENV if env is None else env)


def test_redaction_section_keys_patterns_and_values(tmp_path: Path) -> None:
    secret_file = tmp_path / "webhook.secret"
    secret_file.write_text("whsec-from-a-file-0123456789\n")
    deployment = parse(
        f"""
        redaction:
          keys: [session_id, x-tenant-pin]
          patterns: ['sk-[A-Za-z0-9]{{20,}}', 'ghp_[A-Za-z0-9]{{36}}']
          values:
            - {{env: TOKEN_IN_URLS}}
            - {{file: {secret_file}}}
        """
    )
    settings = deployment.redaction
    assert settings.keys == ("session_id", "x-tenant-pin")
    assert len(settings.patterns) == 2
    assert next(v.reference for v in settings.values) == "env:TOKEN_IN_URLS"
    assert "tok-0123456789abcdef-url" not in repr(deployment)
    redactor = settings.redactor(deployment.known_secrets())
    doc = {
        "url": "https://h/p?t=tok-0123456789abcdef-url",
        "result": "key sk-ABCDEFGHIJKLMNOPQRSTUVWX and whsec-from-a-file-0123456789",
        "sessionId": "visible-only-by-key",
    }
    out = json.dumps(redactor.redact(doc))
    for leaked in ("tok-0123456789abcdef", "sk-ABCDEFGH", "whsec-from", "visible-only-by-key"):
        assert leaked not in out


def test_every_credential_the_deployment_references_is_known() -> None:
    deployment = parse(
        """
        secrets:
          fingerprint_key: {env: FP}
        principals:
          app: {kind: application, tenant: t, api_key: {env: APP_KEY}}
        bindings:
          a.tool:
            executor: http
            url: http://127.0.0.1:9/
            credential: {env: UPSTREAM_KEY}
            signing_key: {env: SIGNING}
        """,
        env={
            **ENV,
            "FP": "fingerprint-key-0123456789",
            "APP_KEY": "app-api-key-0123456789ab",
            "SIGNING": "signing-key-0123456789abc",
        },
    )
    assert deployment.known_secrets() == {
        "fingerprint-key-0123456789",
        "app-api-key-0123456789ab",
        "upstream-key-0123456789",
        "signing-key-0123456789abc",
    }


def test_the_jwt_key_and_the_chat_providers_key_are_known_too(tmp_path: Path) -> None:
    (tmp_path / "jwt.key").write_text("jwt-signing-secret-0123456789\n")
    deployment = parse(
        f"""
        jwt: {{algorithms: [HS256], secret: {{file: {tmp_path / "jwt.key"}}}, audience: a}}
        chat: {{provider: openai, model: m, api_key_env: PROVIDER_KEY}}
        """,
        env={**ENV, "PROVIDER_KEY": "sk-provider-key-0123456789"},
    )
    assert {"jwt-signing-secret-0123456789", "sk-provider-key-0123456789"} <= set(
        deployment.known_secrets()
    )
    # a chat key that is not set is left to the chat module to report
    assert parse("chat: {provider: openai, model: m, api_key_env: UNSET_KEY}").known_secrets() == (
        frozenset()
    )


def test_local_default_knows_its_keys(tmp_path: Path) -> None:
    deployment = local_default_deployment(tmp_path)
    known = deployment.known_secrets()
    files = sorted((tmp_path / ".charter").glob("*.key"))
    assert len(known) == len(files) == 3
    assert {f.read_text().strip() for f in files} == known


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("redaction: [a]", "redaction", "must be a mapping"),
        ("redaction: {nope: []}", "redaction.nope", "unknown field"),
        ("redaction: {keys: x}", "redaction.keys", "must be a list"),
        ("redaction: {keys: ['--']}", "redaction.keys[0]", "letter or digit"),
        ("redaction: {patterns: ['a(?=b)']}", "redaction.patterns[0]", "not a valid RE2"),
        ("redaction: {patterns: ['']}", "redaction.patterns[0]", "non-empty"),
        ("redaction: {values: ['inline-secret-value']}", "redaction.values[0]", "inline"),
        ("redaction: {values: [{env: MISSING_VAR}]}", "redaction.values[0]", "MISSING_VAR"),
    ],
)
def test_redaction_section_errors_name_the_field(text: str, field: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert field in str(info.value)
    assert message in str(info.value)
    assert "inline-secret-value" not in str(info.value)


# --- nothing prints arguments ----------------------------------------------------------------


def test_records_holding_arguments_or_results_hide_them_from_repr() -> None:
    from charter.kernel.envelope import CallStatus, Envelope
    from charter.kernel.executor_port import ExecutionOutcome
    from charter.providers.base import ChatMessage, ToolCallRecord, ToolInvocation, ToolOutcome
    from charter.providers.events import MessageCompleted, TextDelta, ToolCallRequested

    from .conftest import request

    value = "innocent-looking-query-4711"
    records: list[Any] = [
        request(arguments={"query": value, "nested": {"note": value}}),
        ExecutionOutcome(status="succeeded", result={"echo": value}, log=value),
        Envelope(call_id="c", status=CallStatus.SUCCEEDED, data={"echo": value}),
        ToolInvocation(call_id="c", name="t", arguments=json.dumps({"q": value})),
        ToolCallRecord(call_id="c", name="t", arguments=json.dumps({"q": value})),
        ToolOutcome(status="succeeded", content=value, data={"q": value}),
        ChatMessage(role="user", text=value),
        TextDelta(text=value),
        MessageCompleted(text=value),
        ToolCallRequested(call_id="c", name="t", arguments=value),
    ]
    for record in records:
        assert value not in repr(record), type(record).__name__
        assert value not in str(record), type(record).__name__
