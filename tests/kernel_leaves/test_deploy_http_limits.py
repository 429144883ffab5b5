"""``limits.http`` of the deployment file: the bounds of a request head (deploy/http_limits.py)."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from charter.deploy.deployment import parse_deployment
from charter.deploy.http_limits import HeadLimits
from charter.errors import ConfigError


def parse(text: str) -> Any:
    return parse_deployment(yaml.safe_load(textwrap.dedent(text)), env={})


def test_the_defaults_are_nginx_and_apache_s() -> None:
    limits = parse("environment: x\n").limits.http
    assert limits == HeadLimits(
        max_url_bytes=8192,
        max_header_bytes=8192,
        max_head_bytes=32768,
        max_headers=100,
        head_timeout_s=30.0,
    )
    assert parse("limits: {http: null}\n").limits.http == limits


def test_each_bound_is_read_and_described() -> None:
    deployment = parse(
        "limits:\n"
        "  http: {max_url_bytes: 2048, max_header_bytes: 4096, max_head_bytes: 65536,\n"
        "         max_headers: 50, head_timeout_s: 2.5}\n"
    )
    assert deployment.limits.http == HeadLimits(
        max_url_bytes=2048,
        max_header_bytes=4096,
        max_head_bytes=65536,
        max_headers=50,
        head_timeout_s=2.5,
    )
    assert deployment.describe()["limits"]["http"]["max_headers"] == 50


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("limits: {http: {max_headers: 0}}\n", "limits.http.max_headers", "positive integer"),
        ("limits: {http: {max_url_bytes: 1.5}}\n", "limits.http.max_url_bytes", "positive"),
        ("limits: {http: {head_timeout_s: -1}}\n", "limits.http.head_timeout_s", "positive"),
        ("limits: {http: {max_body: 5}}\n", "limits.http.max_body", "unknown field"),
        ("limits: {http: [1]}\n", "limits.http", "mapping"),
        (
            "limits: {http: {max_url_bytes: 65536}}\n",
            "limits.http.max_url_bytes",
            "not be larger than max_head_bytes",
        ),
        (
            "limits: {http: {max_head_bytes: 4096}}\n",
            "limits.http.max_url_bytes",
            "not be larger than max_head_bytes",
        ),
    ],
)
def test_each_refusal_names_its_field(text: str, where: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert f"{where}:" in str(info.value)
    assert says in str(info.value)
