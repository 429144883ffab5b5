"""An MCP request cut off by a stopping server still answers what became of its call.

A stopping HTTP server (``charter serve``, ``charter mcp --transport http``) lets the requests
in flight finish for its grace period, then cancels the ones still running. For a governed
``tools/call`` that cancellation reached no one who could answer: the SDK runs the tool in a
task of its own (handshake-era requests) or tears the request down around it (2026-07-28),
so the client got no JSON-RPC answer, or a bare 500 — for a call whose outcome is unknown.

Here the request's own cancellation is kept from the SDK (:func:`served`): it is turned into
a :class:`Cut` of the request's kernel calls instead. Each is cancelled where it runs, the
kernel records how far it got (``unknown`` / ``CALL_CANCELLED`` for a tool cut off mid-run),
and the call answers that recorded envelope as its MCP result (:meth:`Cut.call`), which the
SDK sends as usual. The same idempotency key keeps that answer; the tool is never run again.
A request with no kernel call running is cancelled as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any

from charter.kernel.endcall import recorded_answer
from charter.kernel.envelope import Envelope

ANSWER_S = 3.0
"""How long a cut-off request waits for its calls' recorded answers to be sent (the kernel
records them in milliseconds), and a stopping endpoint for its requests to be answered."""


class Cut:
    """The kernel calls one request is running, which a stopping server may cut off."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._cut: set[asyncio.Task[Any]] = set()
        self.done = False

    async def call(self, calling: Awaitable[Envelope]) -> Envelope:
        """``calling``'s envelope (a kernel call's) — or, when the request is cut off during
        it, the envelope the kernel recorded for the call before giving the cancellation
        back."""
        task = asyncio.current_task()
        assert task is not None
        with self._held(task):
            try:
                return await calling
            except asyncio.CancelledError as stopped:
                recorded = recorded_answer(stopped)
                if recorded is None or task not in self._cut:
                    raise  # not this cut's (the task's own cancellation): it goes on
                self._cut.discard(task)
                task.uncancel()  # handled: answered with what the kernel recorded
                return recorded

    @contextlib.contextmanager
    def _held(self, task: asyncio.Task[Any]) -> Iterator[None]:
        self._running.add(task)
        if self.done:  # cut off already: the call is cancelled at its first wait
            self._cancel(task)
        try:
            yield
        finally:
            self._running.discard(task)

    def cut(self) -> bool:
        """Cancel every kernel call the request is running (and any it starts later); False
        when none is running."""
        self.done = True
        for task in list(self._running):
            self._cancel(task)
        return bool(self._running)

    def _cancel(self, task: asyncio.Task[Any]) -> None:
        if task not in self._cut:
            self._cut.add(task)
            task.cancel("the server is stopping: the call is cut off")


async def served(serving: Coroutine[Any, Any, None], cut: Cut) -> None:
    """Run ``serving`` (the SDK answering one request) so that a cancellation of this request
    — a stopping server's, at the end of its grace period — cuts off the request's kernel
    calls (``cut``) and lets the SDK send their recorded answers (at most :data:`ANSWER_S`),
    instead of tearing the request down unanswered."""
    task = asyncio.ensure_future(serving)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            if cut.cut():  # the calls answer what the kernel recorded, and the SDK sends it
                await asyncio.wait({task}, timeout=ANSWER_S)
            if not task.done():  # nothing to cut, or no answer in time: cancelled as before
                task.cancel()
                await asyncio.wait({task}, timeout=ANSWER_S)
                raise
        me = asyncio.current_task()
        if me is not None:
            me.uncancel()  # handled: the request was answered
    task.result()  # the SDK's own error, if it raised one
