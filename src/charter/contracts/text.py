"""Free text and identifiers that people and agents send: bounded on the way in, cut short
on the way back out.

Every surface (Python, the shell, HTTP, MCP, the console) reaches the same checks, so a
3 MB rejection note or a 100,000-character profile name is refused or shortened the same
way everywhere:

* :func:`bounded` refuses text longer than its limit with ``invalid_input`` and a reason
  naming the field (``REASON_TOO_LONG``, ``OBJECTIVE_TOO_LONG``), ``details`` carrying the
  ``field`` and the ``limit`` — before anything is recorded;
* :func:`shown` is a value an error message may echo: a short prefix, control characters and
  lone surrogates escaped (the caller chose its length and its bytes); :func:`clipped` one a
  record of a refusal may keep.
"""

from __future__ import annotations

from charter.errors import InvalidInput

__all__ = ["MAX_OBJECTIVE", "MAX_REASON", "SHOWN", "bounded", "clipped", "shown"]

MAX_REASON = 2048
"""Characters of a decision's, an ending's or a resolution's reason (``REASON_TOO_LONG``)."""
MAX_OBJECTIVE = 4096
"""Characters of a context's objective (``OBJECTIVE_TOO_LONG``)."""
SHOWN = 64
"""Characters of a caller's value an error message echoes."""


def bounded(value: str | None, *, field: str, limit: int, reason: str) -> None:
    """Refuse ``value`` longer than ``limit`` characters: ``InvalidInput`` with ``reason``,
    naming ``field`` and ``limit`` (never the value). None and shorter text pass; a value
    that is not text (a library caller's bytes, a number) is ``TEXT_NOT_STRING``."""
    if value is not None and not isinstance(value, str):
        raise InvalidInput(
            f"{field} must be a string, not {type(value).__name__}",
            reason="TEXT_NOT_STRING",
            details={"field": field},
        )
    if value is not None and len(value) > limit:
        raise InvalidInput(
            f"{field} is longer than {limit} characters ({len(value)})",
            reason=reason,
            details={"field": field, "limit": limit},
        )


def shown(text: object, limit: int = SHOWN) -> str:
    """``text`` as an error message may echo it, quoted: at most ``limit`` characters (then
    ``…``), control characters and lone surrogates escaped."""
    value = str(text)
    cut = value if len(value) <= limit else value[: limit - 1] + "…"
    return repr(cut)  # repr escapes control characters and lone surrogates


def clipped(text: str, limit: int) -> str:
    """A caller's invalid value as a record may keep it: at most ``limit`` characters, lone
    surrogates escaped (no store or answer can encode them)."""
    return text[:limit].encode("utf-8", "backslashreplace").decode("utf-8")
