"""Pause the cyclic garbage collector while one pass builds many long-lived objects.

Verifying and replaying a run parses every event and keeps the documents and the rebuilt
projection rows until the pass ends: hundreds of thousands of container objects, none of them
in a reference cycle. CPython's collector, triggered by those allocations, would traverse the
growing heap again and again (about a quarter of a verified replay's time, measured by
``bench/replay.py``) to free nothing. Reference counting still frees everything as usual; only
cycle detection waits until the last concurrent pass ends, when it is switched back on (if it
was on before the first one began).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Within this block (nestable, from any thread) the cyclic collector does not run."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
