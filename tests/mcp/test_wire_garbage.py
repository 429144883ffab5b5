"""A careless or hostile MCP client, through the real ``charter mcp`` process (stdio and HTTP).

Every line a client sends is answered on stdio — garbage with a JSON-RPC error naming the
problem and where it is (never the value) — stdout carries nothing but JSON-RPC, and the
server goes on serving afterwards. The HTTP transport answers the same garbage the same way,
and an empty body too.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo

pytestmark = pytest.mark.slow

SECRET = "sk-live-DO-NOT-ECHO-4711"
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "careless", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wire")
    made = charter("init", "demo", cwd=root)
    assert made.returncode == 0, made.stderr
    return root / "demo"


def _env() -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1"}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return env


class Wire:
    """A raw stdio MCP client: bytes in, every stdout line parsed as JSON."""

    def __init__(self, demo: Path) -> None:
        self.proc = subprocess.Popen(
            [CHARTER, "mcp", "--profile", "reader", "--as", "app"],
            cwd=demo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        self.buffer = b""
        self.late: list[dict[str, Any]] = []

    def send(self, line: bytes | dict[str, Any]) -> None:
        raw = json.dumps(line).encode() if isinstance(line, dict) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        """The next stdout line, which must be one JSON-RPC message."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, "no answer: the server dropped the message"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                assert chunk, "the server closed stdout"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)  # stdout carries only JSON-RPC
        assert message.get("jsonrpc") == "2.0", message
        return message

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        rest = self.buffer + self.proc.stdout.read()
        for line in rest.splitlines():  # what came after the last answer is JSON-RPC too
            self.late.append(json.loads(line))
            assert self.late[-1].get("jsonrpc") == "2.0", rest
        err = self.proc.stderr.read().decode()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, err


@pytest.fixture
def wire(demo: Path) -> Iterator[Wire]:
    client = Wire(demo)
    try:
        client.send(INIT)
        assert "result" in client.receive()
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()


def call(ident: int, arguments: Any, name: Any = "notes_search") -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


LONG_NUMBER = b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"n":' + b"9" * 5000 + b"}}"
GARBAGE: list[tuple[bytes | dict[str, Any], Any, int, str, str | None]] = [
    # (line, answered id, JSON-RPC code, reason, pointer)
    (f"not json {SECRET}".encode(), None, -32700, "MESSAGE_NOT_JSON", None),
    (b'{"jsonrpc":"2.0","id":7,', None, -32700, "MESSAGE_NOT_JSON", None),
    (b"\x00\x01\x02", None, -32700, "MESSAGE_NOT_JSON", None),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', None, -32700, "MESSAGE_NOT_UTF8", None),
    (b"[]", None, -32600, "MESSAGE_NOT_OBJECT", None),
    (f'"{SECRET}"'.encode(), None, -32600, "MESSAGE_NOT_OBJECT", None),
    (b"42", None, -32600, "MESSAGE_NOT_OBJECT", None),
    (call(11, [1, 2]), 11, -32602, "PARAMS_INVALID", "/params/arguments"),
    (call(12, SECRET), 12, -32602, "PARAMS_INVALID", "/params/arguments"),
    # null is not an arguments object (omitting them is how a call gives none), as over the
    # HTTP API; it was taken for {} and the tool ran
    (call(26, None), 26, -32602, "PARAMS_INVALID", "/params/arguments"),
    (call(13, {}, name=123), 13, -32602, "PARAMS_INVALID", "/params/name"),
    # a duplicate key outside the arguments: the message itself is ambiguous — and with two
    # ids, which one to answer cannot be told: null (JSON-RPC 2.0, 5)
    (b'{"jsonrpc":"2.0","id":16,"id":17,"method":"tools/list"}', None, -32600,
     "ARGS_DUPLICATE_KEY", ""),
    (b'{"jsonrpc":"2.0","id":17,"method":"tools/list","method":"x"}', 17, -32600,
     "ARGS_DUPLICATE_KEY", ""),
    ({"jsonrpc": "1.0", "id": 18, "method": "tools/list"}, 18, -32600, "MESSAGE_INVALID", None),
    # an id that is not a string or an integer: the SDK took these for notifications and
    # never answered (stdio: silence; HTTP: 202 with an empty body)
    ({"jsonrpc": "2.0", "id": {"k": SECRET}, "method": "tools/list"}, None, -32600,
     "MESSAGE_INVALID", "/id"),
    ({"jsonrpc": "2.0", "id": [19], "method": "tools/list"}, None, -32600, "MESSAGE_INVALID",
     "/id"),
    ({"jsonrpc": "2.0", "id": 20.5, "method": "tools/list"}, None, -32600, "MESSAGE_INVALID",
     "/id"),
    (b'{"jsonrpc":"2.0","id":2e1,"method":"tools/list"}', None, -32600, "MESSAGE_INVALID", "/id"),
    ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None, -32600, "MESSAGE_INVALID",
     "/id"),
    ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None, -32600, "MESSAGE_INVALID",
     "/id"),
    (call(21, {"query": ""}) | {"id": False}, None, -32600, "MESSAGE_INVALID", "/id"),
    (LONG_NUMBER, None, -32700, "MESSAGE_NOT_JSON", None),
    # an id with a lone surrogate (valid JSON, not Unicode) cannot be written in an answer:
    # it was echoed, and over stdio the server died writing it (every later line unanswered)
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', None, -32600,
     "ARGS_LONE_SURROGATE", "/id"),
    (b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"notes_search","arguments":'
     b'{"query":"\\udfff"}},"id":"r\\ud800"}', None, -32602, "ARGS_LONE_SURROGATE",
     "/params/arguments/query"),
    # params of a served method that do not fit it: the SDK said only "Invalid request
    # parameters" (data ""), with no reason and no place
    ({"jsonrpc": "2.0", "id": 22, "method": "tools/call",
      "params": {"name": "notes_search", "arguments": {}, "_meta": SECRET}}, 22, -32602,
     "PARAMS_INVALID", "/params/_meta"),
    ({"jsonrpc": "2.0", "id": 23, "method": "tools/list", "params": {"cursor": 5}}, 23, -32602,
     "PARAMS_INVALID", "/params/cursor"),
    ({"jsonrpc": "2.0", "id": 24, "method": "resources/read", "params": {}}, 24, -32602,
     "PARAMS_INVALID", "/params/uri"),
    ({"jsonrpc": "2.0", "id": 25, "method": "resources/list", "params": []}, 25, -32602,
     "PARAMS_INVALID", "/params"),
]  # fmt: skip

WORDING = {
    LONG_NUMBER: "Parse error: a number in the message has too many digits",
    json.dumps({"jsonrpc": "2.0", "id": [19], "method": "tools/list"}).encode(): (
        "Invalid Request: id must be a string or an integer, not an array"
    ),
    json.dumps({"jsonrpc": "2.0", "id": None, "method": "tools/list"}).encode(): (
        "Invalid Request: id must be a string or an integer, not null"
    ),
}
"""The exact message of some refusals (keyed by the line as sent)."""


def _sent(line: bytes | dict[str, Any]) -> bytes:
    return json.dumps(line).encode() if isinstance(line, dict) else line


def test_every_garbage_line_gets_a_json_rpc_error_and_the_server_goes_on(wire: Wire) -> None:
    for line, ident, code, reason, pointer in GARBAGE:
        wire.send(line)
        answer = wire.receive()
        assert answer["id"] == ident, (line, answer)
        assert answer["error"]["code"] == code, (line, answer)
        assert answer["error"]["data"]["reason"] == reason, (line, answer)
        if pointer is not None:
            assert answer["error"]["data"]["pointer"] == pointer, (line, answer)
        if _sent(line) in WORDING:
            assert answer["error"]["message"] == WORDING[_sent(line)]
        assert SECRET not in json.dumps(answer)
    # still serving: a good call after all of it succeeds
    wire.send(call(99, {"query": ""}))
    answer = wire.receive()
    assert answer["id"] == 99
    assert answer["result"]["isError"] is False, answer
    code, err = wire.close()
    assert code == 0, err
    assert "Traceback" not in err
    assert SECRET not in err


KERNEL_REFUSES: list[tuple[bytes, str]] = [
    # arguments only the kernel's strict parser may judge: refused by it, and recorded
    (
        ('{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"notes_search",'
         f'"arguments":{{"query":"a","query":"{SECRET}","idempotency_key":"dup-1"}}}}}}').encode(),
        "ARGS_DUPLICATE_KEY",
    ),
    (
        b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"notes_search",'
        b'"arguments":{"query":"\\ud800","idempotency_key":"sur-1"}}}',
        "ARGS_LONE_SURROGATE",
    ),
]  # fmt: skip


def check_kernel_refusal(answer: dict[str, Any], reason: str) -> None:
    result = answer["result"]
    assert result["isError"] is True, answer
    assert result["_meta"]["charter/status"] == "rejected", answer
    assert result["structuredContent"]["error"]["reason"] == reason, answer
    assert SECRET not in json.dumps(answer)


def recorded_refusals(demo: Path) -> dict[str, str]:
    """call id -> the reason the ledger recorded for it, over every run of the project."""
    found: dict[str, str] = {}
    for run in json.loads(charter("runs", "ls", "--json", cwd=demo).stdout):
        events = charter("runs", "events", run["run_id"], "--json", cwd=demo).stdout
        for line in events.splitlines():
            event = json.loads(line)
            if event["type"] == "tool_call_recorded":
                found[event["payload"]["call_id"]] = event["payload"].get("reason") or ""
    return found


def test_arguments_with_a_repeated_key_or_a_lone_surrogate_are_refused_by_the_kernel(
    wire: Wire, demo: Path
) -> None:
    for line, reason in KERNEL_REFUSES:
        wire.send(line)
        check_kernel_refusal(wire.receive(), reason)
    assert wire.close()[0] == 0
    recorded = recorded_refusals(demo)
    assert recorded.get("dup-1") == "ARGS_DUPLICATE_KEY", recorded
    assert recorded.get("sur-1") == "ARGS_LONE_SURROGATE", recorded


def test_an_idempotency_key_that_is_not_a_string_is_refused_not_coerced(
    wire: Wire, demo: Path
) -> None:
    """A key that is not a string, or not a possible call id (100,000 characters, a slash),
    is refused before the kernel: neither echoed back nor written into the ledger."""
    long_key = "k" * 100_000
    for ident, key in ((1, 42), (2, {"a": 1}), (3, True), (5, long_key), (6, "a/b"), (7, "")):
        wire.send(call(ident, {"query": "", "idempotency_key": key}))
        answer = wire.receive()
        result = answer["result"]
        assert result["isError"] is True, answer
        error = result["structuredContent"]["error"]
        assert error["reason"] == "IDEMPOTENCY_KEY_INVALID", error
        assert "idempotency_key" in error["message"]
        assert "_meta" not in result or "charter/call_id" not in result["_meta"]
        assert long_key not in json.dumps(answer)
    wire.send(call(4, {"query": "", "idempotency_key": "key-4"}))
    answer = wire.receive()
    assert answer["result"]["_meta"]["charter/call_id"] == "key-4"
    assert wire.close()[0] == 0
    recorded = recorded_refusals(demo)
    assert "key-4" in recorded
    assert not any(len(call_id) > 128 for call_id in recorded), "a key reached the ledger"


def test_any_valid_request_id_names_a_call(wire: Wire) -> None:
    """A string id that cannot be part of a call id — a slash, spaces, 200 characters — is
    valid JSON-RPC: the call runs (its call id derived from a hash of the id) instead of being
    rejected CALL_ID_INVALID, and the same id sent again names the same call; ``"7"`` and
    ``7`` are two ids, so two calls."""
    named = []
    for ident in ("req/1 of session a", "r" * 200, "7", 7):
        answers = []
        for _ in range(2):
            wire.send(call(0, {"query": ""}) | {"id": ident})
            answers.append(wire.receive())
        for answer in answers:
            assert answer["id"] == ident
            assert answer["result"]["isError"] is False, answer
        first, again = (a["result"]["_meta"]["charter/call_id"] for a in answers)
        assert first == again, (first, again)
        assert len(first) <= 128
        named.append(first)
    assert len(set(named)) == 4, named
    assert wire.close()[0] == 0


def test_a_line_longer_than_the_limit_is_refused_and_the_next_one_served(wire: Wire) -> None:
    huge = b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"x":"' + b"a" * (9 << 20)
    wire.send(huge + b'"}}')
    answer = wire.receive(timeout=60)
    assert answer["id"] is None
    assert answer["error"]["data"]["reason"] == "MESSAGE_TOO_LARGE"
    wire.send({"jsonrpc": "2.0", "id": 6, "method": "tools/list"})
    assert [t["name"] for t in wire.receive()["result"]["tools"]] == ["notes_get", "notes_search"]
    assert wire.close()[0] == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_http_answers_the_same_garbage_without_echoing_it(demo: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [CHARTER, "mcp", "--profile", "reader", "--transport", "http", "--port", str(port)],
        cwd=demo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    url = f"http://127.0.0.1:{port}/mcp/reader"
    key = (demo / ".charter" / "secrets" / "app.key").read_text().strip()
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    try:
        with httpx.Client(trust_env=False, timeout=30) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    http.get(url)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, (
                        "charter mcp --transport http never listened"
                    )
                    time.sleep(0.2)
            for line, ident, code, reason, pointer in GARBAGE:
                answer = http.post(url, content=_sent(line), headers=headers)
                assert answer.status_code == (200 if code == -32602 else 400), answer.text
                message = answer.json()
                assert message["id"] == ident, (line, message)
                assert message["error"]["code"] == code, (line, message)
                assert message["error"]["data"]["reason"] == reason, (line, message)
                if pointer is not None:
                    assert message["error"]["data"]["pointer"] == pointer
                if _sent(line) in WORDING:
                    assert message["error"]["message"] == WORDING[_sent(line)]
                assert SECRET not in answer.text
            # an empty body (with or without a Content-Type), then a JSON null: each is
            # answered at once with the guard's error, as any garbage is
            untyped = {k: v for k, v in headers.items() if k != "Content-Type"}
            for body, sent, code, reason in (
                (b"", headers, -32700, "MESSAGE_NOT_JSON"),
                (b"", untyped, -32700, "MESSAGE_NOT_JSON"),
                (b"null", headers, -32600, "MESSAGE_NOT_OBJECT"),
            ):
                answer = http.post(url, content=body, headers=sent, timeout=5)
                assert answer.status_code == 400, answer.text
                message = answer.json()
                assert message["id"] is None
                assert message["error"]["code"] == code, message
                assert message["error"]["data"]["reason"] == reason, message
            for line, reason in KERNEL_REFUSES:
                answer = http.post(url, content=line, headers=headers)
                assert answer.status_code == 200, answer.text
                check_kernel_refusal(answer.json(), reason)
            good = http.post(url, json=call(1, {"query": ""}), headers=headers)
            assert good.json()["result"]["isError"] is False, good.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stdout is not None
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
    assert "Traceback" not in err
    assert SECRET not in err


def test_a_client_that_disconnects_mid_call_leaves_the_call_recorded(
    demo_template: Path, tmp_path: Path
) -> None:
    from tests.cli.test_careless_client import with_slow_tool

    demo = copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote
    with_slow_tool(demo)
    client = Wire(demo)
    try:
        client.send(INIT)
        assert "result" in client.receive()
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        client.send(call(1, {"seconds": 4, "idempotency_key": "slow-1"}, name="slow_wait"))
        # until the tool is running: its dispatch intent is in the ledger before it starts
        started = demo / "tools" / "slow.started"
        deadline = time.monotonic() + 60
        while not started.exists():
            assert client.proc.poll() is None, "the server ended before the call started"
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.02)
        code, err = client.close()  # the client goes away in the middle of the call
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()
    assert code == 0, err
    assert "Traceback" not in err
    assert [m.get("id") for m in client.late] in ([], [1])  # at most the call's own answer
    recorded = recorded_refusals(demo)
    assert recorded.get("slow-1") == "CALL_CANCELLED", recorded  # recorded, not dispatching
