"""The delegating span a call is made in, carried in a :class:`contextvars.ContextVar`.

A tool whose contract declares ``delegates_execution`` runs other tools: while the kernel runs
it, :data:`CURRENT_SPAN` holds its span id, so every call made through the runtime from inside
it (in the same task, or a task or worker thread started from it — both copy the context)
records that span as its ``parent_span_id``. The executor helper (:mod:`charter.remote`) sets
it from the ``span_id`` the kernel sent with the request, and :mod:`charter.client` passes it on
to the server in the :data:`PARENT_SPAN_HEADER` header, so a remote delegating tool's calls are
children too. Outside a delegating call it is ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

PARENT_SPAN_HEADER = "X-Charter-Parent-Span"
"""The HTTP header in which a client names the delegating span its call is made in."""

SPAN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""What a span id looks like (checked with ``fullmatch`` where one arrives from outside)."""

CURRENT_SPAN: ContextVar[str | None] = ContextVar("charter_delegating_span", default=None)


def current_span() -> str | None:
    """The span of the delegating call this code runs inside, or ``None``."""
    return CURRENT_SPAN.get()


@contextmanager
def delegating(span_id: str | None) -> Iterator[None]:
    """Run the block as inside the delegating call ``span_id`` (``None``: inside none)."""
    token = CURRENT_SPAN.set(span_id)
    try:
        yield
    finally:
        CURRENT_SPAN.reset(token)
