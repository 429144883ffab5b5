"""Test-only fault points: kill the process at a named phase of the call path.

Crash tests set ``CHARTER_FAULT=<point>`` (and ``CHARTER_FAULT_TOOL=<tool id>`` to limit it
to one tool) in a subprocess; when the kernel reaches that point, the process SIGKILLs
itself — no cleanup, no flush — exactly like a machine losing power or an OOM kill. Without
the environment variable, :func:`point` is a dictionary lookup and returns.

Points, in call-path order: ``before_intent``, ``after_intent``, ``during_dispatch`` (inside
the executor call, after the tool started), ``after_result`` (result in hand, outcome not yet
committed).
"""

from __future__ import annotations

import os
import signal

POINTS = ("before_intent", "after_intent", "during_dispatch", "after_result")


def point(name: str, tool_id: str | None = None) -> None:
    wanted = os.environ.get("CHARTER_FAULT")
    if wanted is None or wanted != name:
        return
    only = os.environ.get("CHARTER_FAULT_TOOL")
    if only is not None and only != tool_id:
        return
    os.kill(os.getpid(), signal.SIGKILL)
