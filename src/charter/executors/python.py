"""The in-process Python executor.

Tools are Python callables, given directly (``functions={"notes.add": add}``) or by their
Build entrypoint (``entrypoints={"notes.add": "tools/notes.py:add"}`` plus the project root),
imported once and cached. Async functions run natively on the caller's event loop; sync
functions run in a worker thread (``anyio.to_thread.run_sync``). A function whose declaration
names a ``charter.Context`` parameter receives the request's context there.

Deadlines: the call runs under ``anyio.move_on_after(deadline_s)``. When the deadline passes
the executor sets ``context.cancelled`` and answers ``unknown`` / ``TIMEOUT``. An async tool is
cancelled at its next ``await``. **A thread cannot be killed**: a sync tool keeps running in
its thread until it returns (it should poll ``ctx.cancelled``); when it finally returns, its
late result is discarded — the call already answered ``unknown``, which is the honest answer
because its effect may still happen. The executor hands the kernel (``request.linger``) what
completes when that thread really ends, and the kernel keeps the run's write lock until then,
so a later write of the run never overlaps it. Use the subprocess executor for a hard
deadline: it kills its worker on timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import threading
import types
import typing
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.to_thread

from charter.contracts.decorator import declaration, declared_contract
from charter.contracts.tool_context import Context
from charter.errors import ContractError, Failure, InternalFailure, InvalidInput, TimeoutFailure
from charter.kernel import faults
from charter.kernel.executor_port import (
    ARGS_MISMATCH,
    TIMEOUT,
    TOOL_IMPORT_FAILED,
    TOOL_NOT_FOUND,
    TOOL_NOT_STARTED,
    TOOL_RAISED,
    ExecutionOutcome,
    ExecutionRequest,
    MessageRedactor,
    ToolThreadUse,
    ensure_json,
    failed,
    failure_from,
    in_doubt,
    scrub_details,
    succeeded,
    unknown,
)
from charter.kernel.flight import resumed
from charter.project.loader import import_project_module

# Worker threads for sync tools, per event loop: a pool of their own, so slow tools never make
# the runtime's own thread work (a run's lock file, audit writes, policy hooks) wait.
TOOL_THREADS = 40

_log = logging.getLogger("charter.executors.python")

# Argument-name sets remembered per tool (whether they fit its signature); past this many a
# tool whose schema admits arbitrary names binds each call afresh instead of growing the cache.
MAX_CACHED_BINDINGS = 64


class ResolvedTool:
    """A callable plus how to call it: the name of its Context parameter and its signature."""

    __slots__ = ("_fits", "context_param", "function", "is_async", "signature")

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.context_param = context_param_of(function)
        self.is_async = inspect.iscoroutinefunction(function)
        self.signature = inspect.signature(function)
        self._fits: dict[frozenset[str], bool] = {}

    def fits(self, kwargs: Mapping[str, Any]) -> bool:
        """Whether the function takes these keyword arguments.

        ``Signature.bind`` with keywords only looks at their names (which exist, which are
        required, which are positional-only), never their values: the answer is remembered per
        set of names, so a tool's usual calls bind once.
        """
        names = frozenset(kwargs)
        fits = self._fits.get(names)
        if fits is None:
            try:
                self.signature.bind(**kwargs)
                fits = True
            except TypeError:
                fits = False
            if len(self._fits) < MAX_CACHED_BINDINGS:
                self._fits[names] = fits
        return fits


def context_param_of(function: Callable[..., Any]) -> str | None:
    """The parameter a ``charter.Context`` is injected into: from ``@tool``, else the hints."""
    decl = declaration(function)
    if decl is not None:
        return decl.context_param
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # unresolvable forward references: no injection
        return None
    return next((name for name, hint in hints.items() if hint is Context), None)


def declared_by(function: Callable[..., Any]) -> dict[str, Any]:
    """What ``function``'s code declares (the ``@charter.tool`` contract): its version and
    contract digest, or ``problem`` when the declaration is invalid; version and digest are
    ``None`` for a function that declares no contract (a YAML contract's implementation)."""
    if declaration(function) is None:
        return {"version": None, "digest": None, "problem": None}
    try:
        contract = declared_contract(function)
    except ContractError as exc:
        return {"version": None, "digest": None, "problem": str(exc)}
    return {"version": contract.version, "digest": contract.digest, "problem": None}


def resolve_entrypoint(
    root: Path, entrypoint: str, modules: dict[str, ModuleType] | None = None
) -> Callable[..., Any]:
    """``"tools/notes.py:add"`` → the function, imported from the project at ``root``.

    ``modules`` caches imported project files by relative path, so each is imported once.
    """
    relative, sep, qualname = entrypoint.partition(":")
    if not sep or not relative or not qualname:
        raise ValueError(f"entrypoint {entrypoint!r} must look like tools/notes.py:add")
    module = modules.get(relative) if modules is not None else None
    if module is None:
        module = import_project_module(root, relative)
        if modules is not None:
            modules[relative] = module
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{entrypoint} is not callable")
    return typing.cast(Callable[..., Any], obj)


class ToolResolver:
    """Finds the callable for a tool id; imports each project module once (thread-safe)."""

    def __init__(
        self,
        *,
        root: Path | None = None,
        entrypoints: Mapping[str, str] | None = None,
        functions: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self._root = root
        self._entrypoints = dict(entrypoints or {})
        self._resolved: dict[str, ResolvedTool] = {
            tool_id: ResolvedTool(fn) for tool_id, fn in (functions or {}).items()
        }
        self._modules: dict[str, ModuleType] = {}
        self._lock = threading.Lock()

    def cached(self, tool_id: str) -> ResolvedTool | None:
        """The tool if it is already resolved (no import, no blocking)."""
        return self._resolved.get(tool_id)

    def resolve(self, tool_id: str) -> ResolvedTool:
        """Raises ``LookupError`` for an unknown tool, ``ImportError`` (any) if loading fails."""
        found = self._resolved.get(tool_id)
        if found is not None:
            return found
        entrypoint = self._entrypoints.get(tool_id)
        if entrypoint is None or self._root is None:
            raise LookupError(tool_id)
        with self._lock:
            found = self._resolved.get(tool_id)
            if found is None:
                found = ResolvedTool(resolve_entrypoint(self._root, entrypoint, self._modules))
                self._resolved[tool_id] = found
        return found


class PythonExecutor:
    """Runs tools in this process. See the module docstring for deadline semantics."""

    kind = "python"

    def __init__(
        self,
        *,
        redact_message: MessageRedactor,
        root: Path | None = None,
        entrypoints: Mapping[str, str] | None = None,
        functions: Mapping[str, Callable[..., Any]] | None = None,
        threads: int = TOOL_THREADS,
    ) -> None:
        self._redact = redact_message
        self._tools = ToolResolver(root=root, entrypoints=entrypoints, functions=functions)
        self._threads = threads
        self._use = _ThreadCount()  # threads running a tool, and those held past their answer
        # (the loop, its limiter of tool threads): made on the first sync call of each loop
        self._limiter: tuple[asyncio.AbstractEventLoop, anyio.CapacityLimiter] | None = None
        # The running backend's CancelScope class, from the first call's scope: later scopes
        # are made from it directly (``anyio.CancelScope(...)`` looks the backend up anew).
        self._scope_class: Callable[..., anyio.CancelScope] | None = None

    async def aclose(self) -> None:
        """Nothing to release: threads still running a timed-out tool finish on their own."""

    def tool_threads(self) -> ToolThreadUse:
        """The sync-tool threads now: their number, those running a tool, and those running
        one whose call already answered (``stuck``: held until the tool returns)."""
        busy, stuck = self._use.read()
        return ToolThreadUse(capacity=self._threads, busy=busy, stuck=stuck)

    async def describe(self, tool_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """What the code this executor runs declares for each tool (:func:`declared_by`):
        the functions it already holds, or imports them as a call would."""
        out: dict[str, dict[str, Any]] = {}
        for tool_id in tool_ids:
            try:
                resolved = await self._resolve(tool_id)
            except Exception as exc:  # any import failure is the tool's problem, reported
                out[tool_id] = {
                    "version": None,
                    "digest": None,
                    "problem": f"{type(exc).__name__}: {exc}",
                }
                continue
            out[tool_id] = declared_by(resolved.function)
        return out

    async def _resolve(self, tool_id: str) -> ResolvedTool:
        return await anyio.to_thread.run_sync(self._tools.resolve, tool_id)

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        tool_id = request.contract.id
        ctx = request.context
        try:
            cached = self._tools.cached(tool_id)
            tool = cached if cached is not None else await self._resolve(tool_id)
        except LookupError:
            return failed(
                InternalFailure(
                    f"no Python function is bound to tool {tool_id}",
                    reason=TOOL_NOT_FOUND,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                dispatched=False,
            )
        except Exception as exc:
            message = self._redact(f"{type(exc).__name__}: {exc}", request)
            return failed(
                InternalFailure(
                    f"importing the function of tool {tool_id} failed: {message}",
                    reason=TOOL_IMPORT_FAILED,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                dispatched=False,
            )

        kwargs = dict(request.arguments)
        if tool.context_param is not None:
            kwargs[tool.context_param] = ctx
        if not tool.fits(kwargs):
            return failed(
                InvalidInput(
                    f"the arguments do not fit the signature of tool {tool_id}",
                    reason=ARGS_MISMATCH,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                ),
                dispatched=False,
            )

        bound = functools.partial(tool.function, **kwargs)
        loop = asyncio.get_running_loop()
        # A sync tool's worker thread: tells when it returns (an async tool has none).
        ended = None if tool.is_async else _ThreadEnd(loop, self._use)

        def call() -> Any:
            if ended is not None and not ended.begin():
                return None  # the caller gave up before a worker thread was free: never run
            try:
                faults.point("during_dispatch", tool_id)  # test-only: die as the tool starts
                return bound()
            finally:
                if ended is not None:
                    ended.finish()

        result: Any = None
        raised: Exception | None = None
        # ``anyio.move_on_after`` with the loop's clock read here: Charter runs on asyncio,
        # whose anyio clock is ``loop.time()`` (one backend look-up per call instead of two).
        # An async tool's scope gets its deadline (and its timer) only once the tool first
        # waits (:func:`_timed`): one that answers without waiting needs neither.
        deadline = loop.time() + max(request.deadline_s, 0.0)
        if self._scope_class is None:
            self._scope_class = type(anyio.CancelScope())
        scope = self._scope_class() if ended is None else self._scope_class(deadline=deadline)
        try:
            with scope:
                try:
                    if ended is None:
                        result = await _timed(call(), scope, deadline)
                    else:
                        result = await anyio.to_thread.run_sync(
                            call, abandon_on_cancel=True, limiter=self._tool_threads(loop)
                        )
                except anyio.get_cancelled_exc_class():
                    raise
                except Exception as exc:
                    raised = exc
                except SystemExit as exc:  # the tool's sys.exit(): its failure, not ours
                    raised = ToolExited(exc)
        except BaseException:
            # The caller cancelled us (or the loop is shutting down): tell the tool, propagate.
            ctx.cancelled.set()
            if ended is not None and ended.give_up() and request.unstarted is not None:
                request.unstarted()  # it never got a thread: nothing ran
            self._linger(ended, request)
            raise
        if scope.cancelled_caught:
            ctx.cancelled.set()
            if ended is not None and ended.give_up():
                return failed(
                    TimeoutFailure(
                        f"tool {tool_id} did not start within {request.deadline_s:g} s: every "
                        "worker thread of the process was busy, and it never ran",
                        reason=TOOL_NOT_STARTED,
                        retryable=True,
                        call_id=ctx.call_id,
                        run_id=ctx.run_id,
                    ),
                    dispatched=False,
                )
            self._linger(ended, request)
            _log.warning(
                "sync tool still running past its deadline: its thread is held until it "
                "returns (tool %s, call %s, deadline %g s; %d of %d tool threads held so)",
                tool_id,
                ctx.call_id,
                request.deadline_s,
                self._use.read()[1],
                self._threads,
            )
            return unknown(
                TimeoutFailure(
                    f"tool {tool_id} did not finish within {request.deadline_s:g} s; "
                    "its effect may or may not have happened",
                    reason=TIMEOUT,
                    call_id=ctx.call_id,
                    run_id=ctx.run_id,
                    # still running in its thread: the kernel does not retry such a read
                    # (another attempt would hold another thread beside it); not shown in
                    # the envelope, whose error details are chosen (kernel.envelope)
                    details={"thread_held": True},
                )
            )
        if raised is not None:
            return failed(self._failure(raised, request))
        try:
            return succeeded(ensure_json(result))
        except Failure as exc:  # it ran: a write's effect is done, never "failed"
            exc.call_id, exc.run_id = ctx.call_id, ctx.run_id
            return in_doubt(exc, read_only=request.contract.read_only)

    def _tool_threads(self, loop: asyncio.AbstractEventLoop) -> anyio.CapacityLimiter:
        """The limiter of this loop's sync-tool threads (not anyio's default one, which the
        runtime's own thread work shares)."""
        held = self._limiter
        if held is None or held[0] is not loop:
            held = self._limiter = (loop, anyio.CapacityLimiter(self._threads))
        return held[1]

    @staticmethod
    def _linger(ended: _ThreadEnd | None, request: ExecutionRequest) -> None:
        """A sync tool's thread outlives its timeout or cancellation: hand the caller (the
        kernel, which then keeps the run's write lock) what completes when it really ends."""
        if ended is None or ended.give_up():
            return
        ended.abandon()
        if request.linger is not None:
            running = ended.watch()
            if running is not None:
                request.linger(running)

    def _failure(self, exc: Exception, request: ExecutionRequest) -> Failure:
        """The tool raised: keep a Charter failure's code and reason, redact every message."""
        ctx = request.context

        def scrub(text: str) -> str:
            return self._redact(text, request)

        if isinstance(exc, Failure):
            return failure_from(
                exc.code,
                exc.reason,
                scrub(exc.message),
                details=scrub_details(exc.details, scrub),
                retryable=exc.retryable,
                call_id=ctx.call_id,
                run_id=ctx.run_id,
            )
        name = "SystemExit" if isinstance(exc, ToolExited) else type(exc).__name__
        return InternalFailure(
            scrub(f"tool {request.contract.id} raised {name}: {exc}"),
            reason=TOOL_RAISED,
            details={"exception": name},
            call_id=ctx.call_id,
            run_id=ctx.run_id,
        )


class ToolExited(Exception):
    """A tool called ``sys.exit()``: the call fails like any tool exception (``TOOL_RAISED``)
    instead of ending the server, the MCP session or the CLI with the call ``dispatching``."""

    def __init__(self, exc: SystemExit) -> None:
        super().__init__(repr(exc.code))
        self.__cause__ = exc


@types.coroutine
def _timed(
    work: Awaitable[Any], scope: anyio.CancelScope, deadline: float
) -> Generator[Any, Any, Any]:
    """Await ``work`` (an async tool) in ``scope``, whose deadline is set when the tool first
    waits: an answer in its first step (no wait) sets no timer. The deadline was read before
    that step, so it counts the step's time as before; a deadline already past when the tool
    first waits cancels it at that wait, as the timer would have at the loop's next turn.

    From its first wait on, the tool is awaited as ``await work`` would: the task waits on
    what the tool yielded, and what the task throws in (its cancellation) goes to the tool."""
    if not isinstance(work, types.CoroutineType):  # another awaitable: timed throughout
        scope.deadline = deadline
        return (yield from work.__await__())
    try:
        pending = work.send(None)
    except StopIteration as done:
        return done.value
    scope.deadline = deadline
    return (yield from resumed(work, pending))


class _ThreadEnd:
    """When a sync tool's thread returns. Only a caller that stopped waiting for it (a timeout,
    a cancellation) asks (:meth:`watch`); a call that waited for its result knows the thread
    ended, and pays no second wake-up of the loop for it.

    It also decides, once, whether the tool runs at all: a caller that gives up while the call
    still waits for a worker thread (every thread of the process busy) makes sure it never
    starts, so there is no thread to outlive the answer (:meth:`begin`, :meth:`give_up`)."""

    __slots__ = ("_abandoned", "_count", "_done", "_future", "_lock", "_loop", "_started")

    def __init__(self, loop: asyncio.AbstractEventLoop, count: _ThreadCount) -> None:
        self._loop = loop
        self._count = count
        self._lock = threading.Lock()
        self._done = False
        self._started = False
        self._abandoned = False
        self._future: asyncio.Future[None] | None = None

    def begin(self) -> bool:
        """In the worker thread, before the tool: False when the caller has already given up
        on the call (:meth:`give_up`) — the tool must not run."""
        with self._lock:
            if self._done:
                return False
            self._started = True
            self._count.add(busy=1)
            return True

    def give_up(self) -> bool:
        """On the loop, when the caller stops waiting: True when the tool had not started — it
        now never will, and nothing is left running."""
        with self._lock:
            if self._started:
                return False
            self._done = True
            return True

    def abandon(self) -> None:
        """On the loop: the call answered while the tool still runs — its thread is held
        (counted ``stuck``) until :meth:`finish`."""
        with self._lock:
            if self._done or self._abandoned:
                return
            self._abandoned = True
            self._count.add(stuck=1)

    def finish(self) -> None:
        """In the tool's thread, as it returns."""
        with self._lock:
            self._done = True
            future = self._future
            self._count.add(busy=-1, stuck=-1 if self._abandoned else 0)
        if future is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                self._loop.call_soon_threadsafe(_settle, future)

    def watch(self) -> asyncio.Future[None] | None:
        """On the loop: what completes when the thread returns, or None when it already has."""
        with self._lock:
            if self._done:
                return None
            if self._future is None:
                self._future = self._loop.create_future()
            return self._future


def _settle(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


class _ThreadCount:
    """Sync-tool threads running a tool (``busy``) and, of those, the ones whose call already
    answered (``stuck``); changed from worker threads and the loop."""

    __slots__ = ("_busy", "_lock", "_stuck")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._stuck = 0

    def add(self, *, busy: int = 0, stuck: int = 0) -> None:
        with self._lock:
            self._busy += busy
            self._stuck += stuck

    def read(self) -> tuple[int, int]:
        with self._lock:
            return self._busy, self._stuck
