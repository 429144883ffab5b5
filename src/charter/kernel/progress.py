"""Progress messages from a running tool: ``ctx.progress("...")``.

A tool served by the Python executor may report progress while it runs. Each message is
recorded in the run's ledger as a ``tool_progress`` event of stage ``message``
(``{"stage": "message", "context_id", "call_id", "text"}``), so it reaches every reader of
the run's events — ``charter runs events``, ``GET /v1/runs/{id}/events`` as JSON or SSE, the
console — before the call's terminal event.

Messages are redacted as one text stream with the call's redactor (the contract's, plus the
call's secret argument values): a :class:`~charter.kernel.redaction.StreamRedactor` holds
back a tail that could be the start of a known secret, so a secret split across two messages
is scrubbed whole and never reaches the store or a stream. What is held back is emitted with
the next message or when the call ends.

A message may come from the tool's worker thread or from the event loop; recording never
blocks the tool and never fails the call (a message that cannot be recorded is dropped).
Each message is cut to :data:`MAX_MESSAGE_CHARS` characters; after :data:`MAX_MESSAGES`
events of a call further messages are dropped and their number is recorded on the last one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from charter.kernel.redaction import Redactor, StreamRedactor
from charter.ledger.events import NewEvent
from charter.ledger.ports import Store

MAX_MESSAGE_CHARS = 1000
MAX_MESSAGES = 100

_log = logging.getLogger("charter.kernel.progress")
_END = object()
# Guards every channel's ``_closed`` against a message sent from a worker thread as the call
# ends; held only to check it and queue (never across a wait), so one lock serves them all
# and a channel makes none of its own (reentrant: a task factory may send on another).
_LOCK = threading.RLock()


class ProgressChannel:
    """One call's progress messages: :meth:`send` from anywhere, :meth:`close` at the end."""

    __slots__ = (
        "_call_id",
        "_closed",
        "_context_id",
        "_dropped",
        "_loop",
        "_queue",
        "_recorded",
        "_redactor",
        "_run_id",
        "_store",
        "_task",
    )

    def __init__(
        self, store: Store, run_id: str, context_id: str, call_id: str, redactor: Redactor
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._context_id = context_id
        self._call_id = call_id
        self._redactor = redactor
        self._loop = asyncio.get_running_loop()
        self._closed = False
        self._recorded = 0
        self._dropped = 0
        # Made with the first message: most calls send none, and then cost nothing more.
        self._queue: asyncio.Queue[object] | None = None
        self._task: asyncio.Task[None] | None = None

    def send(self, message: str) -> None:
        """Queue a message (thread-safe; ignored once the call has ended)."""
        text = str(message)[:MAX_MESSAGE_CHARS]
        with _LOCK:
            if self._closed:
                return
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is self._loop:
                self._put(text)
            else:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    self._loop.call_soon_threadsafe(self._put, text)

    def _put(self, item: object) -> None:
        """On the loop: queue ``item``, starting the drain with the first message."""
        if self._queue is None:
            if item is _END or self._closed:
                return  # nothing was sent before the call ended
            self._queue = asyncio.Queue()
            stream = StreamRedactor(self._redactor)
            self._task = self._loop.create_task(self._drain(self._queue, stream))
        self._queue.put_nowait(item)

    def close(self) -> asyncio.Task[None] | None:
        """Stop taking messages; the task recording what is queued and the held-back rest,
        to await (shielded) before the outcome, or None when nothing was sent (no wait)."""
        with _LOCK:
            if self._closed:
                return None
            self._closed = True
        self._put(_END)
        return self._task

    async def _drain(self, queue: asyncio.Queue[object], stream: StreamRedactor) -> None:
        while True:
            item = await queue.get()
            if item is _END:
                break
            assert isinstance(item, str)
            if self._recorded >= MAX_MESSAGES:
                self._dropped += 1
                continue
            piece = stream.feed(item)
            if piece:
                await self._record(piece)
        rest = stream.flush()
        if rest or self._dropped:
            await self._record(rest, final=True)

    async def _record(self, text: str, *, final: bool = False) -> None:
        payload: dict[str, object] = {
            "stage": "message",
            "context_id": self._context_id,
            "call_id": self._call_id,
            "text": text,
        }
        if final and self._dropped:
            payload["dropped"] = self._dropped
        try:
            await self._store.append(
                self._run_id, [NewEvent(type="tool_progress", payload=payload)]
            )
        except Exception as exc:  # progress never fails the call
            _log.warning("a progress message could not be recorded: %s", type(exc).__name__)
            return
        self._recorded += 1
