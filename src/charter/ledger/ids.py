"""Identifiers: the seed's ``<slug>-<12 hex>`` ids and the identifier rule every id obeys."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

from charter.errors import InvalidInput

IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""Run, task, artifact, session and workflow identifiers all match this."""

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,110}$")

HexSource = Callable[[int], str]
"""Returns ``n`` random bytes as hex; :func:`secrets.token_hex` in production."""


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and IDENTIFIER.fullmatch(value) is not None


def check_identifier(value: object, *, what: str) -> str:
    """Return ``value`` when it is a valid identifier; raise ``InvalidInput`` otherwise."""
    if not is_identifier(value):
        raise InvalidInput(f"{what} must match {IDENTIFIER.pattern}", reason="INVALID_IDENTIFIER")
    assert isinstance(value, str)
    return value


def new_id(slug: str, *, hex_source: HexSource = secrets.token_hex) -> str:
    """A fresh ``<slug>-<12 hex>`` id (48 random bits after a readable prefix)."""
    if not _SLUG.fullmatch(slug):
        raise InvalidInput(f"id slug must match {_SLUG.pattern}", reason="INVALID_IDENTIFIER")
    return f"{slug}-{hex_source(6)}"
