"""The stdio wire's guard: every line a client sends is answered, garbage included.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message, so a client that
sends one waits forever. :class:`WireGuard` reads the lines first and answers what the server
would never see with a JSON-RPC error naming the problem (never the offending value):

- ``-32700`` parse error: not UTF-8, not JSON (a number too long, nesting too deep), or longer
  than :data:`MAX_MESSAGE_BYTES` (the rest of the line is discarded, ``MESSAGE_TOO_LARGE``);
- ``-32600`` invalid request: not an object (a batch, a number), an ``id`` that is not a
  string or an integer (``MESSAGE_INVALID`` at ``/id``: the SDK would take such a request for
  a notification and never answer it), not a JSON-RPC 2.0 message;
- ``-32602`` invalid params: an object repeating a key (``ARGS_DUPLICATE_KEY``) or a string
  with a lone surrogate (``ARGS_LONE_SURROGATE``) anywhere in the message — ambiguous or
  unencodable, refused as the kernel refuses them on every other surface — a ``tools/call``
  whose ``name`` is not a string or whose ``arguments`` are not an object, and a request
  Charter serves (``tools/…``, ``resources/…``) whose params do not fit its method
  (``PARAMS_INVALID``, at the first field that does not: a ``_meta`` that is not an object, a
  ``cursor`` that is not a string, a ``resources/read`` without its ``uri``).

A request whose ``id`` is that of a request still in flight (not yet answered) is answered
``-32600`` too (``REQUEST_ID_IN_USE``, at ``/id``) and never reaches the server, so its tool
never runs: JSON-RPC ids must be unique among a client's requests in flight, or the answers
cannot be told apart. The error answers that ``id`` (it is the second request's as much as the
first's); the first request completes as usual, and once answered (or cancelled by the
client: a cancelled request is never answered) its id may be used again.

Each error carries ``data: {reason, pointer}`` (a JSON pointer into the message) and answers
the request's ``id`` when one can be read, else ``id: null`` (also for a message that gives
its ``id`` twice, or an ``id`` with a lone surrogate, which no answer could carry). What
passes goes to the SDK as it came.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""The longest line read whole (the kernel's argument limit is 1 MiB of canonical JSON)."""

_DISCARD_CHUNK = 1 << 16


class _Pairs(dict[str, Any]):
    """A JSON object that repeated ``repeated`` (the last value is kept, and refused); its
    members as written are in ``pairs``."""

    repeated: str | None = None
    pairs: list[tuple[str, Any]]


def _marked(pairs: list[tuple[str, Any]]) -> _Pairs:
    """An object whose members repeat a key: the first key repeated, and the members."""
    seen: set[str] = set()
    marked = _Pairs(pairs)
    for key, _ in pairs:
        if key in seen:
            marked.repeated = key
            break
        seen.add(key)
    marked.pairs = pairs
    return marked


def _parse(text: str) -> tuple[Any, bool]:
    """The JSON ``text``, and whether an object in it repeats a key (marked: :class:`_Pairs`)."""
    repeats: list[_Pairs] = []

    def pairs(members: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(members)
        if len(out) == len(members):
            return out
        repeats.append(_marked(members))
        return repeats[-1]

    return json.loads(text, object_pairs_hook=pairs), bool(repeats)


_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
"""Where a lone surrogate could be: a decoded UTF-8 line holds one only as a ``\\u`` escape
(this also matches valid pairs and escaped backslashes; those are then looked at whole)."""


def _as_written(value: Any) -> str:
    """``value`` as JSON text with every member as written: repeated keys and lone surrogates
    (escaped) included, for the kernel's strict parser to find and refuse."""
    if isinstance(value, _Pairs):
        members = value.pairs
    elif isinstance(value, dict):
        members = list(value.items())
    elif isinstance(value, list):
        return "[" + ",".join(_as_written(v) for v in value) + "]"
    else:
        return json.dumps(value)
    return "{" + ",".join(f"{json.dumps(k)}:{_as_written(v)}" for k, v in members) + "}"


def _pointer(path: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _find_problem(value: Any, path: list[str]) -> tuple[str, str, list[str]] | None:
    """The first repeated key or lone surrogate in ``value``: (reason, what, path)."""
    stack: list[tuple[Any, list[str]]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            repeated = getattr(node, "repeated", None)
            if repeated is not None:
                what = f"the object at {_pointer(where) or '/'} repeats the key {repeated!r}"
                return "ARGS_DUPLICATE_KEY", what, where
            for key, item in reversed(list(node.items())):
                if _has_surrogate(key):
                    what = f"a key of the object at {_pointer(where) or '/'} has a lone surrogate"
                    return "ARGS_LONE_SURROGATE", what, where
                stack.append((item, [*where, key]))
        elif isinstance(node, list):
            stack.extend((item, [*where, str(i)]) for i, item in reversed(list(enumerate(node))))
        elif isinstance(node, str) and _has_surrogate(node):
            return (
                "ARGS_LONE_SURROGATE",
                f"the string at {_pointer(where)} has a lone surrogate",
                where,
            )
    return None


Refusal = tuple[str | int | None, int, str, dict[str, Any]]
"""(request id, JSON-RPC error code, message, data)."""


@dataclass(frozen=True, slots=True)
class Checked:
    """What became of one message: the text to give the SDK (None: nothing) and that text as
    the SDK's message (validated here, once), the refusal to answer instead, and for a
    ``tools/call`` whose arguments the kernel must refuse itself (a repeated key, a lone
    surrogate) those arguments as written, under the request's id."""

    text: str | None
    refusal: Refusal | None = None
    request_id: str | int | None = None
    raw_arguments: str | None = None
    message: types.JSONRPCMessage | None = None


def _request_id(message: dict[str, Any]) -> str | int | None:
    """The request's id, or None when there is none to answer — not a string or an integer,
    a string with a lone surrogate (no answer could carry it: it is not Unicode, so it cannot
    be written as UTF-8), or given more than once (which one the client means cannot be told:
    ``id: null``)."""
    pairs = getattr(message, "pairs", None)
    if pairs is not None and sum(1 for key, _ in pairs if key == "id") > 1:
        return None
    ident = message.get("id")
    if isinstance(ident, str):
        return None if _has_surrogate(ident) else ident
    if isinstance(ident, int) and not isinstance(ident, bool):
        return ident
    return None


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),  # before int: a bool is an int to Python
    (float, "a number with a fraction or an exponent"),
    (dict, "an object"),
    (list, "an array"),
)


def _id_problem(message: dict[str, Any]) -> str | None:
    """What the message's ``id`` is when it cannot be one (None: it can, or there is none).

    JSON-RPC 2.0 ids are strings or numbers without a fraction; MCP narrows them to strings
    and integers and never null in a request. Only an error may answer ``id: null`` (a request
    whose id could not be read)."""
    if "id" not in message:
        return None
    ident = message["id"]
    if ident is None:
        return None if "error" in message and "method" not in message else "null"
    for kind, name in _JSON_TYPES:
        if isinstance(ident, kind):
            return name
    return None  # a string or an integer


def _tool_call_problem(message: dict[str, Any]) -> tuple[str, str] | None:
    """A ``tools/call`` request's params that no tool call can be made of: (field, why)."""
    if message.get("method") != "tools/call" or "id" not in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return "params", "params must be an object with the tool's name and arguments"
    if not isinstance(params.get("name"), str):
        return "params.name", "params.name must be the tool's name (a string)"
    # absent means no arguments; null is not an object (as over the HTTP API, where
    # "arguments": null is ARGS_NOT_OBJECT): a member that is there is never read as absent
    if "arguments" in params and not isinstance(params["arguments"], dict):
        return "params.arguments", "params.arguments must be an object (the arguments by name)"
    return None


_SERVED = {
    model.model_fields["method"].default: model
    for model in (
        types.CallToolRequest,
        types.ListToolsRequest,
        types.ListResourcesRequest,
        types.ListResourceTemplatesRequest,
        types.ReadResourceRequest,
    )
}
"""The requests Charter's server answers, by method: their params are checked here, so a
malformed one is answered with a reason and a pointer (the SDK answers only "Invalid request
parameters")."""


def _params_problem(message: dict[str, Any]) -> tuple[str, str] | None:
    """A served request whose params do not fit its method: (JSON pointer, why)."""
    method = message.get("method")
    model = _SERVED.get(method) if isinstance(method, str) and "id" in message else None
    if model is None:
        return None
    request = {"method": method}
    if "params" in message:
        request["params"] = message["params"]
    try:
        model.model_validate(request, by_name=False)
    except ValueError as exc:
        error = next(iter(_errors(exc)), None)
        if error is None:  # pragma: no cover - a ValueError that is not pydantic's
            return "/params", f"the params of {method} are not valid"
        pointer = _pointer([str(p) for p in error["loc"]])
        return pointer, f"{pointer}: {error['msg']} (the params of {method})"
    return None


def check_line(raw: bytes) -> Checked:
    """One line (or HTTP body) from the client, checked."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"Parse error: the message is not valid UTF-8 (byte {exc.start})"
        return Checked(None, (None, types.PARSE_ERROR, why, {"reason": "MESSAGE_NOT_UTF8"}))
    if not text.strip():
        return Checked(None)
    try:
        message, repeats = _parse(text)
    except json.JSONDecodeError as exc:
        why = f"Parse error: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        return Checked(None, (None, types.PARSE_ERROR, why, {"reason": "MESSAGE_NOT_JSON"}))
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        if isinstance(exc, RecursionError):
            why = "Parse error: the message is nested too deeply"
        else:
            why = "Parse error: a number in the message has too many digits"
        return Checked(None, (None, types.PARSE_ERROR, why, {"reason": "MESSAGE_NOT_JSON"}))
    if not isinstance(message, dict):
        kind = "batches (JSON arrays) are not supported" if isinstance(message, list) else ""
        why = f"Invalid Request: a message must be a JSON object{'; ' + kind if kind else ''}"
        return Checked(None, (None, types.INVALID_REQUEST, why, {"reason": "MESSAGE_NOT_OBJECT"}))
    bad_id = _id_problem(message)
    if bad_id is not None:
        why = f"Invalid Request: id must be a string or an integer, not {bad_id}"
        data = {"reason": "MESSAGE_INVALID", "pointer": "/id"}
        return Checked(None, (None, types.INVALID_REQUEST, why, data))
    ident = _request_id(message)
    # the walk only where a problem can be (most lines have no repeated key and no escape)
    maybe = repeats or _MAYBE_SURROGATE.search(text) is not None
    problem = _find_problem(message, []) if maybe else None
    if problem is not None and ident is not None and problem[2][:2] == ["params", "arguments"]:
        handed = _for_the_kernel(message, ident)
        if handed is not None:
            return handed
    if problem is not None:
        reason, what, where = problem
        data = {"reason": reason, "pointer": _pointer(where)}
        code = types.INVALID_PARAMS if where[:1] == ["params"] else types.INVALID_REQUEST
        label = "Invalid params" if code == types.INVALID_PARAMS else "Invalid Request"
        return Checked(None, (ident, code, f"{label}: {what}", data))
    bad_call = _tool_call_problem(message)
    if bad_call is not None:
        field, why = bad_call
        data = {"reason": "PARAMS_INVALID", "pointer": "/" + field.replace(".", "/")}
        return Checked(None, (ident, types.INVALID_PARAMS, f"Invalid params: {why}", data))
    bad_params = _params_problem(message)
    if bad_params is not None:
        pointer, why = bad_params
        data = {"reason": "PARAMS_INVALID", "pointer": pointer}
        return Checked(None, (ident, types.INVALID_PARAMS, f"Invalid params: {why}", data))
    try:
        valid = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) for e in _errors(exc)})[:5]
        why = "Invalid Request: not a JSON-RPC 2.0 message (jsonrpc, id, method or params)"
        return Checked(
            None,
            (ident, types.INVALID_REQUEST, why, {"reason": "MESSAGE_INVALID", "fields": fields}),
        )
    return Checked(text, message=valid)


def _for_the_kernel(message: dict[str, Any], ident: str | int) -> Checked | None:
    """A ``tools/call`` whose only problem is in its arguments: the SDK gets the call with
    just its ``idempotency_key`` (if a string), and the kernel the arguments as written — it
    refuses them (``ARGS_DUPLICATE_KEY``, ``ARGS_LONE_SURROGATE``) and records the refusal,
    as for the same arguments over HTTP or the CLI."""
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict):
        return None
    arguments = params.get("arguments")
    if not isinstance(arguments, dict) or not isinstance(params.get("name"), str):
        return None
    key = arguments.get("idempotency_key")
    kept = {"idempotency_key": key} if isinstance(key, str) and not _has_surrogate(key) else {}
    clean = {**message, "params": {**params, "arguments": kept}}
    if _find_problem(clean, []) is not None:  # another problem elsewhere: refused whole
        return None
    text = json.dumps(clean)
    try:
        valid = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:
        return None
    raw = _as_written(arguments)
    return Checked(text, request_id=ident, raw_arguments=raw, message=valid)


def _errors(exc: ValueError) -> list[dict[str, Any]]:
    errors = getattr(exc, "errors", None)
    try:
        return list(errors(include_input=False)) if callable(errors) else []
    except TypeError:  # pragma: no cover - a ValueError that is not pydantic's
        return []


class WireGuard:
    """The client's lines, checked: the stream of messages the server reads (each validated
    once, here), that answers the other lines itself once :meth:`attach` gave it the write
    stream."""

    def __init__(self, source: BinaryIO | int, *, limit: int = MAX_MESSAGE_BYTES) -> None:
        # a descriptor (a pipe or a socket) is read when the event loop says it is readable;
        # a file object (an embedding host's) by a worker thread
        self._source = source
        self._buffer = bytearray()
        self._eof = False
        self._limit = limit
        self._write: Any = None
        self._attached = anyio.Event()
        self._raw: dict[str | int, str] = {}
        self._closed = False
        self._in_flight: set[str | int] = set()  # the ids of requests not yet answered
        self._refusals: set[int] = set()  # id() of this guard's own answers not yet written

    def raw_arguments(self, request_id: str | int | None) -> str | None:
        """The arguments as written of a ``tools/call`` the kernel must refuse (taken once)."""
        return self._raw.pop(request_id, None) if request_id is not None else None

    def attach(self, write: Any) -> None:
        self._write = write
        self._attached.set()

    async def _refuse(self, refusal: Refusal) -> None:
        ident, code, message, data = refusal
        await self._attached.wait()
        error = types.ErrorData(code=code, message=message, data=data)
        reply = SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))
        self._refusals.add(id(reply))
        await self._write.send(reply)

    def written(self, message: SessionMessage) -> None:
        """``message`` went to the client: a response of the server's frees its request's
        id (this guard's own refusals never do — a refused duplicate's first is still in
        flight)."""
        if id(message) in self._refusals:
            self._refusals.discard(id(message))
            return
        reply = message.message
        if isinstance(reply, types.JSONRPCResponse | types.JSONRPCError) and reply.id is not None:
            self._in_flight.discard(reply.id)

    def _duplicate(self, message: types.JSONRPCMessage) -> Refusal | None:
        """The refusal of a request whose id is in flight; else None (the id is taken). A
        request the client cancels is never answered (MCP): its id is free again at once."""
        if isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled" and isinstance(message.params, dict):
                self._in_flight.discard(message.params.get("requestId"))
            return None
        if not isinstance(message, types.JSONRPCRequest):
            return None
        if message.id in self._in_flight:
            why = (
                f"Invalid Request: id {json.dumps(message.id)[:64]} is already in use by a "
                "request in flight; ids must be unique among requests not yet answered"
            )
            data = {"reason": "REQUEST_ID_IN_USE", "pointer": "/id"}
            return (message.id, types.INVALID_REQUEST, why, data)
        self._in_flight.add(message.id)
        return None

    async def _readline(self, limit: int) -> bytes:
        """The next line of at most ``limit`` bytes (its newline included; the line's start
        when longer; b"" at the end)."""
        if not isinstance(self._source, int):
            # abandoned on cancellation: a blocked read never holds up the server's shutdown
            read = self._source.readline
            return await anyio.to_thread.run_sync(read, limit, abandon_on_cancel=True)
        scanned = 0  # the bytes already looked at for a newline (a long line comes in chunks)
        while True:
            end = self._buffer.find(b"\n", scanned, limit)
            if end >= 0 or len(self._buffer) >= limit or self._eof:
                size = end + 1 if end >= 0 else limit
                line = bytes(self._buffer[:size])
                del self._buffer[:size]
                return line
            scanned = len(self._buffer)
            # no thread hand-off per line: readable, so this read returns what has come
            await anyio.wait_readable(self._source)
            try:
                chunk = os.read(self._source, _DISCARD_CHUNK)
            except BlockingIOError:  # non-blocking (a socket shared with stdout) and not ready
                continue
            self._eof = not chunk
            self._buffer += chunk

    async def _overlong(self) -> None:
        while True:  # discard the rest of the line, in bounded chunks
            more = await self._readline(_DISCARD_CHUNK)
            if not more or more.endswith(b"\n"):
                break
        why = f"Parse error: the message is longer than {self._limit} bytes"
        await self._refuse((None, types.PARSE_ERROR, why, {"reason": "MESSAGE_TOO_LARGE"}))

    async def receive(self) -> SessionMessage:
        """The next message the server may read (``EndOfStream`` when the client is gone)."""
        while not self._closed:
            raw = await self._readline(self._limit + 1)
            if not raw:
                break
            if len(raw) > self._limit and not raw.endswith(b"\n"):
                await self._overlong()
                continue
            checked = check_line(raw)
            if checked.refusal is not None:
                await self._refuse(checked.refusal)
            elif checked.message is not None:
                duplicate = self._duplicate(checked.message)
                if duplicate is not None:
                    await self._refuse(duplicate)
                    continue
                if checked.raw_arguments is not None and checked.request_id is not None:
                    self._raw[checked.request_id] = checked.raw_arguments
                return SessionMessage(checked.message)
        raise anyio.EndOfStream

    # the rest of the SDK's read stream protocol (mcp.shared._stream_protocols.ReadStream)

    async def aclose(self) -> None:
        self._closed = True

    def __aiter__(self) -> WireGuard:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WireGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
