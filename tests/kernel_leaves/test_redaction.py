"""Redaction: pointers, key names at any depth, RE2 patterns, remembered values."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.errors import ConfigError
from charter.kernel.redaction import REDACTED, Redactor, is_sensitive_key, parse_pointer

from .conftest import CANARY, request


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "API_KEY",
        "api-key",
        "Api Key",
        "apiKey",
        "x-auth-token",
        "clientSecret",
        "connection_string",
        "ConnectionString",
        "Authorization",
        "credentials",
        "db_passwd",
        "private-key",
        "refresh_token",
    ],
)
def test_sensitive_key_names(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize("key", ["user", "name", "path", "api", "key", "description", "pass"])
def test_innocent_key_names(key: str) -> None:
    assert not is_sensitive_key(key)


def test_key_names_are_redacted_at_any_depth_without_mutating_the_input() -> None:
    value = {
        "user": "bob",
        "auth": {"headers": [{"Authorization": "Bearer abc"}, {"x-trace": "t1"}]},
        "config": {"db": {"connection_string": {"host": "h", "pw": "p"}}},
        "API_KEY": 12345,
    }
    original = copy.deepcopy(value)
    out = Redactor().redact(value)
    assert value == original
    assert out == {
        "user": "bob",
        "auth": {"headers": [{"Authorization": REDACTED}, {"x-trace": "t1"}]},
        "config": {"db": {"connection_string": REDACTED}},
        "API_KEY": REDACTED,
    }


def test_contract_pointers() -> None:
    redactor = Redactor().with_pointers(["/target/dsn", "/items/1", "/a~1b/c~0d"])
    value = {
        "target": {"dsn": "pg://x", "name": "n"},
        "items": ["a", "b", "c"],
        "a/b": {"c~d": "hidden", "e": "shown"},
        "missing": None,
    }
    assert redactor.redact(value) == {
        "target": {"dsn": REDACTED, "name": "n"},
        "items": ["a", REDACTED, "c"],
        "a/b": {"c~d": REDACTED, "e": "shown"},
        "missing": None,
    }
    assert redactor.redact({"target": "not a mapping"}) == {"target": "not a mapping"}
    assert parse_pointer("/a~1b/c~0d") == ("a/b", "c~d")


def test_invalid_pointer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="JSON pointer"):
        Redactor(pointers=["no-slash"])


def test_patterns_apply_to_every_string_leaf_and_to_text() -> None:
    redactor = Redactor(patterns=[r"sk-[A-Za-z0-9]{8,}", r"\b\d{4}-\d{4}-\d{4}-\d{4}\b"])
    out = redactor.redact(
        {"note": "key sk-abcdefgh123 and card 1234-5678-9012-3456", "list": ["sk-zzzzzzzzzz"]}
    )
    assert out == {"note": f"key {REDACTED} and card {REDACTED}", "list": [REDACTED]}
    assert redactor.redact_text("use sk-abcdefgh123") == f"use {REDACTED}"


def test_patterns_must_be_re2() -> None:
    with pytest.raises(ConfigError, match="RE2"):
        Redactor(patterns=[r"(a)\1"])
    with pytest.raises(ConfigError, match="RE2"):
        Redactor(patterns=[r"(?=lookahead)"])


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    # (a+)+$ backtracks exponentially in `re`; RE2 answers at once
    redactor = Redactor(patterns=[r"(a+)+$"])
    assert redactor.redact_text("a" * 5000 + "!") == "a" * 5000 + "!"


def test_remembered_values_are_scrubbed_from_text_and_from_innocent_leaves() -> None:
    arguments = {"login": {"user": "bob", "password": CANARY}, "n": 1}
    base = Redactor()
    secrets = base.secret_values(arguments)
    assert secrets == {CANARY}
    redactor = base.remember(secrets)
    assert redactor.redact_text(f"failed: {CANARY}!") == f"failed: {REDACTED}!"
    assert redactor.redact({"echo": f"you said {CANARY}"}) == {"echo": f"you said {REDACTED}"}
    assert base.redact_text(CANARY) == CANARY  # remember() returned a new redactor
    assert base.scrub(f"x {CANARY}", secrets) == f"x {REDACTED}"


def test_short_values_are_not_scrubbed_from_text() -> None:
    redactor = Redactor().remember(["abc", "abcd"])
    assert redactor.redact_text("abc abcd") == f"abc {REDACTED}"


def test_key_value_forms_in_free_text() -> None:
    text = (
        'login with password=hunter22 failed; {"api_key": "k-123456"}; '
        "Authorization: Bearer eyJhbGciOi.payload.sig; token: t0ps3cret"
    )
    out = Redactor().redact_text(text)
    for secret in ("hunter22", "k-123456", "eyJhbGciOi", "t0ps3cret"):
        assert secret not in out
    assert "login with password=" in out


def test_a_command_lines_secret_option_values_in_free_text() -> None:
    text = "server --api-key sk-1234 --db-password hunter22 --verbose -t 5 --token --next"
    out = Redactor().redact_text(text)
    assert out == (
        f"server --api-key {REDACTED} --db-password {REDACTED} --verbose -t 5 --token --next"
    )
    assert Redactor().redact_text("a non-secret argument") == "a non-secret argument"


def test_message_redactor_uses_the_request_contract_and_arguments() -> None:
    scrub = Redactor().message_redactor()
    req = request("demo.t", {"conn": {"dsn": CANARY}, "user": "bob"}, redact=("/conn/dsn",))
    assert scrub(f"bob could not use {CANARY}", req) == f"bob could not use {REDACTED}"


def test_repr_shows_no_values() -> None:
    assert CANARY not in repr(Redactor().remember([CANARY]))


SENSITIVE = st.sampled_from(
    [
        "password",
        "API_KEY",
        "api-key",
        "Api Key",
        "x-auth-token",
        "clientSecret",
        "connection_string",
        "Authorization",
        "credential",
        "myToken",
        "SECRET",
    ]
)
INNOCENT = st.text(alphabet="abcdefghijklmnoprsuvwxyz_", min_size=1, max_size=8).filter(
    lambda k: not is_sensitive_key(k)
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-1000, 1000), st.text(alphabet="abcdef ", max_size=6)
)


@st.composite
def documents(draw: Any) -> tuple[Any, list[str]]:
    """A nested JSON document plus the unique secrets it hides under sensitive keys."""
    secrets: list[str] = []

    def secret_value() -> Any:
        token = f"S3CR3T{len(secrets):04d}Q"
        secrets.append(token)
        shape = draw(st.integers(0, 2))
        if shape == 0:
            return token
        if shape == 1:
            return {"inner": token, "other": [token]}
        return [token, {"deep": token}]

    def node(depth: int) -> Any:
        if depth <= 0 or draw(st.integers(0, 3)) == 0:
            return draw(SCALARS)
        if draw(st.booleans()):
            return [node(depth - 1) for _ in range(draw(st.integers(0, 3)))]
        out: dict[str, Any] = {}
        for _ in range(draw(st.integers(0, 4))):
            key = draw(SENSITIVE) if draw(st.integers(0, 2)) == 0 else draw(INNOCENT)
            if key not in out:  # a repeated key would drop a recorded secret
                out[key] = secret_value() if is_sensitive_key(key) else node(depth - 1)
        return out

    return node(5), secrets


def _all_sensitive_values_redacted(value: Any) -> bool:
    if isinstance(value, dict):
        return all(
            (v == REDACTED) if is_sensitive_key(k) else _all_sensitive_values_redacted(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return all(_all_sensitive_values_redacted(v) for v in value)
    return True


@settings(max_examples=150, deadline=None)
@given(documents())
def test_property_no_value_under_a_sensitive_key_survives(doc: tuple[Any, list[str]]) -> None:
    value, secrets = doc
    before = json.dumps(value, sort_keys=True)
    out = Redactor().redact(value)
    assert json.dumps(value, sort_keys=True) == before  # input untouched
    assert _all_sensitive_values_redacted(out)
    dumped = json.dumps(out)
    for secret in secrets:
        assert secret not in dumped
    # and every one of them is a remembered value that text scrubbing would catch
    found = Redactor().secret_values(value)
    assert set(secrets) <= found
