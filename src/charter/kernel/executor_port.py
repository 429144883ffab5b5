"""The executor interface every executor implements (DESIGN §3 steps 8 and 10).

An executor runs one call and reports what it knows about the outcome:

- ``succeeded`` — the tool returned; ``result`` is JSON-compatible.
- ``failed`` — the tool raised, or its result was unacceptable; ``error`` says why. A tool
  that raised a Charter :class:`~charter.errors.Failure` keeps its code and reason; anything
  else is ``internal`` / ``TOOL_RAISED``. ``dispatched`` is ``False`` only when the executor
  refused before any effect could happen (the tool could not be found, or the arguments did
  not fit its signature).
- ``unknown`` — the executor cannot say whether the tool's effect happened: a timeout, a lost
  worker, a crashed process. Never retried here; the kernel decides.

Executors never retry (``attempts`` is always 1 here; the kernel retries read-only idempotent
tools itself) and never see secrets in the clear in their error messages: every message and
string detail passes through the :data:`MessageRedactor` the executor was built with.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from charter.contracts.fastinit import maker
from charter.contracts.model import ToolContract
from charter.contracts.tool_context import Context
from charter.errors import FAILURE_BY_CODE, ContractViolation, ErrorCode, Failure

OutcomeStatus = Literal["succeeded", "failed", "unknown"]

# Reasons executors use.
TOOL_RAISED = "TOOL_RAISED"
TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
TOOL_IMPORT_FAILED = "TOOL_IMPORT_FAILED"
ARGS_MISMATCH = "ARGS_MISMATCH"
RESULT_NOT_JSON = "RESULT_NOT_JSON"
RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
TIMEOUT = "TIMEOUT"
TOOL_NOT_STARTED = "TOOL_NOT_STARTED"  # a deadline passed before the tool could start
WORKER_LOST = "WORKER_LOST"
WORKER_START_FAILED = "WORKER_START_FAILED"
WORKER_PROTOCOL = "WORKER_PROTOCOL"

MAX_RESULT_DEPTH = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionRequest:
    """One call, as the kernel hands it to an executor after every check has passed."""

    contract: ToolContract
    arguments: Mapping[str, Any] = field(repr=False)  # never printed (docs/privacy.md)
    context: Context
    deadline_s: float  # seconds from now; the executor gives up (``unknown``) after it
    # Called by an executor with what completes when work it answered for but could not stop
    # (a sync tool's thread past its deadline or cancellation) really ends; the kernel holds
    # the run's write lock until then.
    linger: Callable[[Awaitable[None]], None] | None = None
    # Called by an executor cancelled before the tool started (a sync tool still waiting for
    # a thread): nothing ran, so the kernel records the call ``cancelled``, not ``unknown``.
    unstarted: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionOutcome:
    """What an executor knows about one call."""

    status: OutcomeStatus
    result: Any = field(default=None, repr=False)  # JSON-compatible when succeeded
    error: Failure | None = None  # when failed or unknown
    dispatched: bool = True  # False only when refused before any effect could happen
    attempts: int = 1
    # redacted, truncated diagnostics (a worker's stderr); never shown to models or printed
    log: str = field(default="", repr=False)

    @property
    def reason(self) -> str | None:
        return self.error.reason if self.error is not None else None


MessageRedactor = Callable[[str, ExecutionRequest], str]
"""Scrubs secrets from a message about ``request`` (an exception text, a stderr tail).

The kernel passes one built from :class:`charter.kernel.redaction.Redactor`: it knows the
contract's ``redact`` pointers and the values of the request's sensitive arguments.
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolThreadUse:
    """The worker threads of sync Python tools: how many there are, how many run a tool now,
    and how many of those run one whose call was already answered (timed out or cancelled —
    a thread cannot be stopped, so it is held until the tool returns)."""

    capacity: int
    busy: int
    stuck: int


class Executor(Protocol):
    """Runs calls of one kind (``python``, ``subprocess``, later ``http`` and ``mcp``)."""

    kind: str

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome: ...

    async def aclose(self) -> None: ...


_make_outcome = maker(ExecutionOutcome)  # once per governed call (contracts/fastinit.py)


def succeeded(result: Any) -> ExecutionOutcome:
    return _make_outcome(
        status="succeeded", result=result, error=None, dispatched=True, attempts=1, log=""
    )


def failed(error: Failure, *, dispatched: bool = True, log: str = "") -> ExecutionOutcome:
    return ExecutionOutcome(status="failed", error=error, dispatched=dispatched, log=log)


def unknown(error: Failure, *, log: str = "") -> ExecutionOutcome:
    return ExecutionOutcome(status="unknown", error=error, log=log)


def in_doubt(error: Failure, *, read_only: bool) -> ExecutionOutcome:
    """An answer that arrived after the request was sent but cannot be trusted or read.

    The effect may have happened: a tool that only reads is ``failed`` (nothing to repeat
    harmfully), any other effect is ``unknown`` — never ``failed``, because a caller retrying
    a failed write with a new call id would repeat the effect. ``docs/executors.md`` has the
    table of answers to outcomes per effect.
    """
    return failed(error) if read_only else unknown(error)


def scrub_details(value: Any, scrub: Callable[[str], str]) -> Any:
    """A copy of ``value`` with every string (keys included) passed through ``scrub``."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {scrub(str(k)): scrub_details(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_details(v, scrub) for v in value]
    return value


def failure_from(
    code: str | ErrorCode,
    reason: str,
    message: str,
    *,
    details: Mapping[str, Any] | None = None,
    retryable: bool = False,
    call_id: str | None = None,
    run_id: str | None = None,
) -> Failure:
    """A :class:`Failure` of the class matching ``code`` (unknown codes become ``internal``)."""
    try:
        error_code = ErrorCode(code)
    except ValueError:
        error_code = ErrorCode.INTERNAL
    cls = FAILURE_BY_CODE[error_code]
    return cls(
        message,
        reason=reason,
        details=details,
        retryable=retryable,
        call_id=call_id,
        run_id=run_id,
    )


def ensure_json(value: Any) -> Any:
    """Return ``value`` as plain JSON data, or raise ``contract_violation`` / ``RESULT_NOT_JSON``.

    Accepted: dicts with string keys, lists (tuples become lists), strings (valid Unicode, no
    lone surrogates), finite numbers, booleans and ``None``. Anything else — sets, bytes,
    NaN, objects — is refused, naming the JSON pointer where it was found (never the value).

    Most results are plain already (exact ``dict``/``list``/``str``/``int``/``float``/``bool``
    /``None``, shallow): :func:`_plain` copies those without building a pointer per key; any
    other value (a subclass, a tuple, something to refuse) goes through :func:`_json`, which
    gives the same copy or names where the problem is.
    """
    try:
        return _plain(value, 0)
    except _NotPlain:
        return _json(value, "", 0)


class _NotPlain(Exception):
    """:func:`_plain` met something it leaves to :func:`_json`."""


_NOT_PLAIN = _NotPlain()


def _plain_str(text: str) -> str:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _NOT_PLAIN from None
    return text


def _plain(value: Any, depth: int) -> Any:
    """A copy of ``value`` when it is plain JSON of exact built-in types, else ``_NotPlain``.

    Equal to what :func:`_json` returns for such a value: strings, integers, booleans and
    ``None`` are immutable and kept; containers are copied; a non-empty container at depth
    :data:`MAX_RESULT_DEPTH` (whose items ``_json`` refuses as too deep) is left to it.
    """
    kind = type(value)
    if kind is dict:
        if value and depth >= MAX_RESULT_DEPTH:
            raise _NOT_PLAIN
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NOT_PLAIN
            if not key.isascii():  # (an ASCII string needs no check: no call for it)
                key = _plain_str(key)
            kind = type(item)
            if kind is str:
                out[key] = item if item.isascii() else _plain_str(item)
            elif kind is int or kind is bool or item is None:
                out[key] = item
            else:
                out[key] = _plain(item, depth + 1)
        return out
    if kind is list:
        if value and depth >= MAX_RESULT_DEPTH:
            raise _NOT_PLAIN
        return [_plain(item, depth + 1) for item in value]
    if kind is str:
        return _plain_str(value)
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _NOT_PLAIN
        return value
    raise _NOT_PLAIN


def _refuse(pointer: str, what: str) -> ContractViolation:
    return ContractViolation(
        f"the tool's result is not JSON: {what} at {pointer or '/'}",
        reason=RESULT_NOT_JSON,
        details={"pointer": pointer or "/"},
    )


def _json(value: Any, pointer: str, depth: int) -> Any:
    if depth > MAX_RESULT_DEPTH:
        raise _refuse(pointer, f"nesting deeper than {MAX_RESULT_DEPTH}")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _refuse(pointer, "a non-finite number")
        return float(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _refuse(pointer, "a string with a lone surrogate") from None
        return str(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _refuse(pointer, f"a {type(key).__name__} key")
            child = pointer + "/" + key.replace("~", "~0").replace("/", "~1")
            out[_json(key, pointer, depth + 1)] = _json(item, child, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_json(item, f"{pointer}/{i}", depth + 1) for i, item in enumerate(value)]
    raise _refuse(pointer, f"a value of type {type(value).__name__}")
