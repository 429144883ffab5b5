"""What the delegation test project's tools reach from the test: the runtime they call
through, and events the test uses to hold a delegating call open."""

from __future__ import annotations

import asyncio
from typing import Any

RUNTIME: list[Any] = []
GATES: dict[str, asyncio.Event] = {}
SEEN: dict[str, Any] = {}


def gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())
