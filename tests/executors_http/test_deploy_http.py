"""``executor: http`` bindings in the deployment file."""

from __future__ import annotations

from typing import Any

import pytest

from charter.deploy.deployment import parse_deployment
from charter.deploy.secret_ref import SecretRef
from charter.errors import ConfigError

ENV = {"CRED": "c" * 32, "SIGN": "s" * 32}


def deployment(binding: dict[str, Any], **top: Any) -> Any:
    return parse_deployment({"bindings": {"a.tool": binding}, **top}, env=ENV)


def http(**extra: Any) -> dict[str, Any]:
    return {
        "executor": "http",
        "url": "http://127.0.0.1:8765/base/",
        "credential": {"env": "CRED"},
        "signing_key": {"env": "SIGN"},
        **extra,
    }


def test_an_http_binding_is_parsed() -> None:
    d = deployment(http(timeout_s=3, max_response_bytes=1000, required=False))
    b = d.bindings["a.tool"]
    assert (b.executor, b.required) == ("http", False)
    assert b.options["url"] == "http://127.0.0.1:8765/base"
    assert isinstance(b.options["credential"], SecretRef)
    assert b.options["credential"].resolve() == b"c" * 32
    assert (b.options["timeout_s"], b.options["max_response_bytes"]) == (3.0, 1000)
    shown = d.describe()["bindings"]["a.tool"]
    assert shown["credential"] == "env:CRED"
    assert shown["signing_key"] == "env:SIGN"
    assert "c" * 32 not in repr(d.describe())


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (
            {"executor": "http", "credential": {"env": "CRED"}, "signing_key": {"env": "SIGN"}},
            "url: is required",
        ),
        (http(credential="inline-secret-value-0123"), "inline secrets are not allowed"),
        (http(signing_key={"env": "CRED"}), "must differ from the credential"),
        (http(url="ftp://host/"), "url: must be an http"),
        (http(url="http://user:pw@host/"), "url: must be an http"),
        (http(url="http://host/x?q=1"), "url: must be an http"),
        (http(timeout_s=0), "timeout_s: must be a positive number"),
        (http(retries=3), "retries"),
        (http(credential={"env": "MISSING"}), "environment variable MISSING is not set"),
    ],
)
def test_bad_http_bindings_are_refused(binding: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        deployment(binding)
    assert message in str(raised.value)
    assert "c" * 32 not in str(raised.value)
    assert "inline-secret-value" not in str(raised.value)


def test_http_cannot_be_the_default_executor() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_deployment({"default_executor": "http"}, env=ENV)
    assert "default_executor" in str(raised.value)
