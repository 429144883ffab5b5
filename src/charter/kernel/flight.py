"""How far one call got, so that whatever interrupts it ends it honestly.

Each call's :class:`~charter.kernel.core.Arrival` carries a :class:`Flight` (shared with its
:class:`~charter.kernel.core.Attempt`). The phases mark it as they pass, and when the call is
cancelled or something raises, ``Kernel.call`` asks it what is already durable:

* ``checks`` — nothing reserved yet: a cancellation is audited ``cancelled``, an exception
  answers ``failed`` / ``internal`` (audited); nothing is left behind;
* ``intent`` — this call's ``dispatching`` intent is being (or has been) committed, the
  executor not yet asked (a write waiting for its run's write lock is still here): the
  intent's append is awaited to its end, then the call is recorded ``cancelled`` (or
  ``failed``): nothing ran;
* ``dispatch`` — the executor was asked (back to ``intent`` when it says the tool never
  started, :meth:`Flight.unstarted`): the call is recorded ``unknown`` (``CALL_CANCELLED``
  or ``INTERNAL_ERROR``): its effect may or may not have happened;
* ``finish`` — the executor answered and the outcome's append is under way: it is awaited, so
  the real outcome is what gets recorded.

The appends of the intent and of the outcome are shielded from the caller's cancellation
(:func:`shielded`): run as tasks, or — when the store vouches for its appends
(:func:`in_place`) — driven by the caller itself, handed to a task only if the caller is
cancelled; either way they finish and the flight knows their result.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import types
import typing
from collections import Counter
from collections.abc import Awaitable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

CHECKS, INTENT, DISPATCH, FINISH = "checks", "intent", "dispatch", "finish"


@dataclass(slots=True, eq=False)
class Flight:
    phase: str = CHECKS
    attempt: Any = None  # the Attempt, once the context is known
    intent: asyncio.Future[Any] | Done | None = None  # the shielded append of the intent
    outcome: asyncio.Future[Any] | Done | None = None  # the shielded recording of the outcome
    key: tuple[str, str] | None = None  # (context, call id) while counted in ``flying``
    waited: bool = False  # a shielded append had to wait (see :func:`shielded`)

    def unstarted(self) -> None:
        """The executor was cancelled before the tool started: as if it was never asked."""
        self.phase = INTENT

    async def settled(self) -> None:
        """Wait until the shielded appends of this call have finished; never raises."""
        pending = [
            f for f in (self.intent, self.outcome) if isinstance(f, asyncio.Future) and not f.done()
        ]
        if pending:
            await asyncio.wait(pending)

    @property
    def reserved(self) -> bool:
        """Whether this call's own intent was committed (not a concurrent duplicate's)."""
        return _ok(self.intent)

    @property
    def recorded(self) -> Any:
        """The outcome's answer when it was recorded, else None."""
        return self.outcome.result() if self.outcome is not None and _ok(self.outcome) else None


def take_off(flying: Counter[tuple[str, str]], flight: Flight, key: tuple[str, str]) -> None:
    """Count this call as running in this process (before its intent is appended, so a
    ``dispatching`` row of this process is never seen uncounted while its call runs)."""
    if flight.key is None:
        flight.key = key
        flying[key] = flying.get(key, 0) + 1  # (Counter's ``+=`` and ``del`` run Python code)


def land(flying: Counter[tuple[str, str]], flight: Flight) -> None:
    """The call has ended here (``Kernel.call`` returns or raises): stop counting it. A row
    of this process still ``dispatching`` after that is stranded (its outcome could not be
    recorded) and is reconciled (:meth:`charter.kernel.operators.Operators.reconcile`)."""
    key, flight.key = flight.key, None
    if key is not None:
        left = flying.get(key, 0) - 1
        if left > 0:
            flying[key] = left
        else:
            flying.pop(key, None)


class Done:
    """A slot's work that finished in its first step (:func:`shielded`), read as the done
    future of a result: what a future created and settled there would say, for a few
    hundred instructions instead of a few thousand."""

    __slots__ = ("_result",)

    def __init__(self, result: Any) -> None:
        self._result = result

    def done(self) -> bool:
        return True

    def cancelled(self) -> bool:
        return False

    def exception(self) -> BaseException | None:
        return None

    def result(self) -> Any:
        return self._result


def _ok(future: asyncio.Future[Any] | Done | None) -> bool:
    return (
        future is not None
        and future.done()
        and not future.cancelled()
        and future.exception() is None
    )


def in_place(store: object) -> bool:
    """Whether ``store``'s class vouches that its ``append`` may run in the caller's task:
    it binds nothing to the current task across a wait (no anyio cancel scope or task group,
    no ``asyncio.timeout``), which would break when a task of its own goes on with it, and
    waits only on asyncio futures.
    The vouch (``append_in_place``) names the very function: a subclass that overrides
    ``append`` does not inherit it."""
    kind = type(store)
    vouched = getattr(kind, "append_in_place", None)
    return vouched is not None and vouched is getattr(kind, "append", None)


async def shielded(flight: Flight, slot: str, work: Awaitable[T], *, eager: bool = False) -> T:
    """Run ``work`` (the intent's or the outcome's append) so that the caller's cancellation
    cannot stop it; ``flight`` keeps it in ``slot`` (``intent`` or ``outcome``).

    ``eager`` (work that binds nothing to the current task across a wait, see
    :func:`in_place`): the coroutine's first step runs at once, in a copy of the caller's
    context (what a task would run it in). An append that never waits (the memory store, an
    inline SQLite commit) is done there, with no task and no event-loop round, and the slot
    holds its settled result. Work that waits is driven on in the caller's task, which waits
    on a future of its own (:func:`_driven`); only when the caller is cancelled does the rest
    go on as a task (:func:`resumed` continues it where it stopped).

    What ``await asyncio.shield(task)`` does, one event-loop round sooner: the caller awaits
    a future of its own, which the task settles as its last step (``asyncio.shield`` settles
    it from the task's done callback, a round later). A cancelled caller cancels only that
    future and leaves at once; the task runs on, and the flight has its result."""
    if eager and isinstance(work, types.CoroutineType):  # (not the slower Coroutine ABC)
        done, result = begin(flight, slot, work)
        return typing.cast(T, result) if done else await result
    loop = asyncio.get_running_loop()
    context: contextvars.Context | None = None
    flight.waited = True
    answer: asyncio.Future[T] = loop.create_future()
    task = loop.create_task(_relay(work, answer), context=context)
    setattr(flight, slot, task)
    try:
        return await answer
    except BaseException:
        # The caller has the exception (or left): the task's own is not "never retrieved".
        if task.done():
            _retrieve(task)
        else:
            task.add_done_callback(_retrieve)
        raise


def begin(flight: Flight, slot: str, work: Awaitable[T]) -> tuple[bool, Any]:
    """``shielded(flight, slot, work, eager=True)`` without a coroutine of its own for work
    that ends in its first step: ``(True, its result)`` then, else ``(False, what to await
    for the result)`` — the rest driven as :func:`shielded` drives it. Raises what the
    first step raised."""
    if not isinstance(work, types.CoroutineType):
        return False, shielded(flight, slot, work)  # not a coroutine: as a task
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    try:
        pending = context.run(work.send, None)
    except StopIteration as stop:
        setattr(flight, slot, Done(stop.value))
        return True, stop.value
    except BaseException as exc:
        setattr(flight, slot, _settled(loop, None, exc))
        raise
    flight.waited = True
    return False, _driven(loop, flight, slot, work, pending, context)


def _settled(
    loop: asyncio.AbstractEventLoop, result: Any, exc: BaseException | None
) -> asyncio.Future[Any]:
    """A future of work that ended in its first step, as :class:`Flight` reads its slots."""
    future = loop.create_future()
    if exc is None:
        future.set_result(result)
    else:
        _settle(future, exc)
    return future


def _settle(future: asyncio.Future[Any], exc: BaseException) -> None:
    """Settle ``future`` with the work's exception, which its caller already has."""
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
        future.exception()  # the caller has it: not "never retrieved"


@types.coroutine
def _driven(
    loop: asyncio.AbstractEventLoop,
    flight: Flight,
    slot: str,
    work: Coroutine[Any, Any, T],
    pending: Any,
    context: contextvars.Context,
) -> Generator[Any, None, T]:
    """Drive ``work`` (stopped at ``pending``) to its end in the caller's task, with no task
    of its own, unless the caller is cancelled: then the rest goes on as a task at once.

    The caller waits on a future of its own (:func:`_proxy`) that ``pending`` settles, never
    on ``pending`` itself, so its cancellation cancels only that future and the work's own
    wait is untouched; the task then waits for ``pending`` and drives the work to its end.
    The slot holds a future settled with the work's result, or that task."""
    done: asyncio.Future[T] = loop.create_future()
    setattr(flight, slot, done)
    while True:
        try:
            yield _proxy(loop, pending)
        except BaseException:
            # The caller was cancelled (or closed): hand the work over, then leave.
            task = loop.create_task(_rest(work, pending), context=context)
            task.add_done_callback(_retrieve)  # the caller left: nobody reads its exception
            setattr(flight, slot, task)
            raise
        try:
            pending = context.run(work.send, None)
        except StopIteration as stop:
            result = typing.cast(T, stop.value)
            done.set_result(result)
            return result
        except BaseException as exc:
            _settle(done, exc)
            raise


def _proxy(loop: asyncio.AbstractEventLoop, pending: Any) -> Any:
    """What the caller's task waits on for ``pending``: a future of its own settled when
    ``pending`` is (``None``, a bare yield, is passed on: the task runs again next round)."""
    if pending is None:
        return None
    proxy = loop.create_future()
    pending.add_done_callback(functools.partial(_wake, proxy))
    proxy._asyncio_future_blocking = True  # what ``await future`` sets for the task
    return proxy


def _wake(proxy: asyncio.Future[Any], _: Any) -> None:
    if not proxy.done():  # cancelled with its caller
        proxy.set_result(None)


async def _rest(work: Coroutine[Any, Any, T], pending: Any) -> T:
    return await resumed(work, pending)


@types.coroutine
def resumed(work: Coroutine[Any, Any, T], pending: Any) -> Generator[Any, None, T]:
    """The rest of a coroutine that stopped at ``pending`` (what its first step yielded):
    the task waits for ``pending`` as the coroutine would have, then drives it to its end.
    Whatever the task throws in meanwhile (its cancellation at shutdown) goes to the
    coroutine."""
    while True:
        try:
            yield pending
        except BaseException as exc:
            try:
                pending = work.throw(exc)
            except StopIteration as done:
                return typing.cast(T, done.value)
            continue
        return typing.cast(T, (yield from work))


async def _relay(work: Awaitable[T], answer: asyncio.Future[T]) -> T:
    """Await ``work`` and hand its result (or exception, or cancellation) to ``answer``
    unless the caller already left."""
    try:
        result = await work
    except asyncio.CancelledError:
        answer.cancel()
        raise
    except BaseException as exc:
        if not answer.done():
            answer.set_exception(exc)
        raise
    if not answer.done():
        answer.set_result(result)
    return result


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
