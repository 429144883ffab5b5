"""Test-only fault points: kill the process at a named phase of the call path.

Crash tests set ``CHARTER_FAULT=<point>`` (and ``CHARTER_FAULT_TOOL=<tool id>`` to limit it
to one tool) in a subprocess; when the kernel reaches that point, the process SIGKILLs
itself — no cleanup, no flush — exactly like a machine losing power or an OOM kill. The
variables are read when a kernel is built (:func:`arm`, from
:class:`~charter.kernel.core.KernelState`), not at every point: the call path pays a tuple
read and a comparison per point.

Points, in call-path order: ``before_intent``, ``after_intent``, ``during_dispatch`` (inside
the executor call, after the tool started), ``after_result`` (result in hand, outcome not yet
committed).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

POINTS = ("before_intent", "after_intent", "during_dispatch", "after_result")

_armed: tuple[str | None, str | None] = (None, None)  # (point, only this tool)


def arm(environ: Mapping[str, str] = os.environ) -> None:
    """Read ``CHARTER_FAULT`` and ``CHARTER_FAULT_TOOL`` (a crash test's child process sets
    them before it opens its runtime)."""
    global _armed
    _armed = (environ.get("CHARTER_FAULT"), environ.get("CHARTER_FAULT_TOOL"))


def point(name: str, tool_id: str | None = None) -> None:
    wanted, only = _armed
    if wanted is None or wanted != name:
        return
    if only is not None and only != tool_id:
        return
    os.kill(os.getpid(), signal.SIGKILL)


arm()
