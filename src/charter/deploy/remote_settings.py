"""The deployment file's settings for remote executors: ``readiness`` and ``egress``.

``readiness.ttl_s`` — how long a readiness report is trusted (at context resolution and
before every remote call's intent), 0–3600 s, default 5. ``egress.allow`` — the networks
(CIDR or single addresses) and host names remote executors may be reached at; see
:mod:`charter.executors.egress` for what is always refused. ``docs/deploy.md`` documents
both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from charter.errors import ConfigError
from charter.executors.egress import EgressPolicy

DEFAULT_READINESS_TTL_S = 5.0

Check = Callable[[Any, str, frozenset[str]], Mapping[str, Any]]
Fail = Callable[[str, str], ConfigError]


def remote_settings(
    doc: Mapping[str, Any], mapping: Check, fail: Fail
) -> tuple[float, EgressPolicy]:
    """``(readiness ttl, egress policy)`` from the top-level document, checked field by field."""
    ttl = DEFAULT_READINESS_TTL_S
    if "readiness" in doc:
        section = mapping(doc["readiness"], "readiness", frozenset({"ttl_s"}))
        if "ttl_s" in section:
            value = section["ttl_s"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
                raise fail("readiness.ttl_s", "must be a number of seconds")
            if not 0 <= value <= 3600:
                raise fail("readiness.ttl_s", "must be between 0 and 3600 seconds")
            ttl = float(value)
    egress = EgressPolicy()
    if "egress" in doc:
        section = mapping(doc["egress"], "egress", frozenset({"allow"}))
        allow = section.get("allow")
        if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
            raise fail("egress.allow", "must be a list of networks (CIDR) and host names")
        try:
            egress = EgressPolicy.parse(allow)
        except ValueError as exc:
            raise fail("egress.allow", str(exc)) from None
    return ttl, egress
