"""``charter.remote.app`` against a careless or hostile caller, spoken to over HTTP on a real
executor process: a coded body, a body not sent as JSON, a body that is not strict JSON or
not an object, one too large or too slow, repeated or missing credential headers, a replay,
values no JSON peer can hold. Each is refused before anything runs, with a signed answer
naming the reason and the header or member at fault — never a 500, never a secret echoed,
never a journal row left half-written."""

from __future__ import annotations

import gzip
import json
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.contracts.decorator import declared_contract
from charter.executors.http_protocol import (
    NONCE_HEADER,
    RESPONSE_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    answer_signature_matches,
    dumps,
    signed_headers,
)
from tests.executors_http import fault_tools
from tests.executors_http.conftest import FaultExecutor, running_executor

ORDER = declared_contract(fault_tools.order)


def call(key: str | None = None, **members: Any) -> dict[str, Any]:
    key = key or uuid.uuid4().hex
    doc: dict[str, Any] = {
        "call_id": "c-" + key,
        "idempotency_key": key,
        "tool": {"id": ORDER.id, "version": ORDER.version, "contract_digest": ORDER.digest},
        "arguments": {"item": "pen"},
        "deadline": 5,
        "attribution": {"tenant": "t1", "principal": "app", "run_id": "r", "context_id": "x"},
    }
    doc.update(members)
    return doc


def signed(executor: FaultExecutor, payload: bytes, path: str = "/execute") -> dict[str, str]:
    return signed_headers(
        credential=executor.credential.encode(),
        signing_key=executor.signing_key.encode(),
        method="GET" if path == "/describe" else "POST",
        path=path,
        body=payload,
        now=time.time(),
    )


def send(
    executor: FaultExecutor,
    payload: bytes,
    headers: list[tuple[str, str]] | dict[str, str] | None = None,
) -> httpx2.Response:
    sent = signed(executor, payload) if headers is None else headers
    return httpx2.post(f"{executor.url}/execute", content=payload, headers=sent, timeout=30)


def nonces(executor: FaultExecutor) -> set[str]:
    db = sqlite3.connect(executor.journal)
    try:
        return {row[0] for row in db.execute("SELECT nonce FROM nonces")}
    finally:
        db.close()


def refused(
    executor: FaultExecutor,
    answer: httpx2.Response,
    status: int,
    reason: str,
    *,
    nonce: str,
    echoed: dict[str, Any] | None = None,
) -> str:
    """Check a refusal: its status and reason, a signature Charter believes, no secret in
    it; returns its message."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert error["reason"] == reason, error
    assert set(error) == {"code", "reason", "message"}
    fields = {"call_id": "", "idempotency_key": "", "contract_digest": ""}
    if echoed is not None:
        fields = {
            "call_id": echoed["call_id"],
            "idempotency_key": echoed["idempotency_key"],
            "contract_digest": echoed["tool"]["contract_digest"],
        }
    assert answer_signature_matches(
        executor.signing_key.encode(),
        answer.headers.get(RESPONSE_SIGNATURE_HEADER),
        status=status,
        nonce=nonce,
        body=answer.content,
        **fields,
    )
    for secret in (executor.credential, executor.signing_key):
        assert secret not in answer.text
    assert "Traceback" not in answer.text
    return str(error["message"])


@pytest.fixture
def untouched(executor: FaultExecutor) -> Iterator[FaultExecutor]:
    """The executor; after the test, nothing ran and nothing was journalled."""
    effects, executions = executor.effects(), executor.executions()
    yield executor
    assert executor.effects() == effects
    assert executor.executions() == executions


# ------------------------------------------------------------------------------------------
# Content-Encoding and Content-Type


@pytest.mark.parametrize(
    ("codings", "named"),
    [
        (["gzip"], "(gzip)"),
        (["br"], "(br)"),
        (["identity, gzip"], "(gzip)"),
        (["identity", "deflate"], "(deflate)"),
        (["x-secret-coding"], "(a coding that is not registered)"),
    ],
)
@pytest.mark.parametrize("compressed", [False, True])
def test_a_coded_body_is_415_and_nothing_runs_or_is_journalled(
    untouched: FaultExecutor, codings: list[str], named: str, compressed: bool
) -> None:
    """The body was read as plain JSON whatever its ``Content-Encoding``: a plain body
    labelled ``gzip`` ran the tool, a gzip body was "not valid JSON". Now it is ``415``
    before the body is read — signed over empty fields, with ``Accept-Encoding: identity`` —
    and the request's nonce is not spent, so the same request sent plainly runs once."""
    executor = untouched
    doc = call()
    plain = dumps(doc)
    payload = gzip.compress(plain) if compressed else plain
    headers = signed(executor, payload)
    coded = [*headers.items(), *(("Content-Encoding", c) for c in codings)]
    answer = send(executor, payload, coded)
    nonce = headers[NONCE_HEADER]
    message = refused(executor, answer, 415, "UNSUPPORTED_MEDIA_TYPE", nonce=nonce, echoed=doc)
    assert message.startswith(f"the body is encoded {named}")
    assert "Content-Encoding" in message
    assert answer.json()["error"]["code"] == "invalid_input"
    assert answer.headers["accept-encoding"] == "identity"
    assert "x-secret-coding" not in answer.text
    assert headers[NONCE_HEADER] not in nonces(executor)


def test_a_body_sent_plainly_after_a_415_runs_once(executor: FaultExecutor) -> None:
    effects = executor.effects()
    payload = dumps(call())
    headers = signed(executor, payload)
    coded = send(executor, payload, {**headers, "Content-Encoding": "gzip"})
    assert coded.status_code == 415
    plain = send(executor, payload, {**headers, "Content-Encoding": "identity"})
    assert plain.status_code == 200, plain.text
    assert plain.json()["status"] == "succeeded"
    assert executor.effects() == effects + 1
    assert send(executor, payload, headers).status_code == 401  # now it is a replay


@pytest.mark.parametrize(
    ("content_types", "named"),
    [
        (["text/plain"], "not 'text/plain'"),
        (["text/plain; charset=utf-8"], "not 'text/plain'"),
        (["application/x-www-form-urlencoded"], "not 'application/x-www-form-urlencoded'"),
        (["application/jsonx"], "not 'application/jsonx'"),
        (["application/json; charset=latin-1"], "not charset 'latin-1'"),
        (["application/json", "text/plain"], "Content-Type header was sent 2 times"),
    ],
)
def test_a_body_not_sent_as_json_is_415(
    untouched: FaultExecutor, content_types: list[str], named: str
) -> None:
    """A body labelled ``text/plain`` (or latin-1, or twice) was run as JSON."""
    executor = untouched
    doc = call()
    payload = dumps(doc)
    headers = signed(executor, payload)
    sent = [*headers.items(), *(("Content-Type", t) for t in content_types)]
    answer = send(executor, payload, sent)
    nonce = headers[NONCE_HEADER]
    message = refused(executor, answer, 415, "UNSUPPORTED_MEDIA_TYPE", nonce=nonce, echoed=doc)
    assert named in message
    assert answer.headers["accept"] == "application/json"


@pytest.mark.parametrize(
    "content_type", [None, "application/json", 'Application/JSON; charset="UTF-8"']
)
def test_json_or_no_content_type_is_taken(
    executor: FaultExecutor, content_type: str | None
) -> None:
    payload = dumps(call())
    headers = signed(executor, payload)
    if content_type is not None:
        headers["Content-Type"] = content_type
    answer = send(executor, payload, headers)
    if content_type is None:
        assert "content-type" not in answer.request.headers
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded"


# ------------------------------------------------------------------------------------------
# bodies that are not strict JSON objects

_KEY = "k-" + uuid.uuid4().hex
_GOOD = dumps(call(_KEY))


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        (b"", "the body is empty"),
        (b"hello", "the body is not valid JSON (Expecting value: character 0)"),
        (_GOOD[:-1], "the body is not valid JSON (Expecting ',' delimiter: character "),
        (b"null", "the body must be a JSON object, not null"),
        (b"[" + _GOOD + b"]", "the body must be a JSON object, not an array"),
        (b'"call"', "the body must be a JSON object, not a string"),
        (b"7", "the body must be a JSON object, not a number"),
        (
            _GOOD.replace(b'{"call_id"', b'{"call_id":"c-other","call_id"', 1),
            "the member 'call_id' appears twice (at /call_id)",
        ),
        (
            _GOOD.replace(b'{"item"', b'{"item":"ink","item"', 1),
            "the member 'item' appears twice (at /arguments/item)",
        ),
        (
            _GOOD.replace(b'"deadline":5', b'"deadline":NaN'),
            "the body holds NaN, which is not JSON",
        ),
        (
            _GOOD.replace(b'"deadline":5', b'"deadline":-Infinity'),
            "holds -Infinity, which is not JSON",
        ),
        (_GOOD.replace(b'"deadline":5', b'"deadline":1e999'), "a number out of range"),
        (_GOOD.replace(b'"pen"', b'"pen\\ud800"'), "a lone surrogate"),
        (b"\xef\xbb\xbf" + _GOOD, "the body is not UTF-8 JSON"),
        (_GOOD.decode().encode("utf-16"), "the body is not UTF-8 JSON"),
        (_GOOD.replace(b'"pen"', b'"caf\xe9"'), "the body is not UTF-8 JSON"),
        (_GOOD.replace(b'"pen"', b"[" * 5000 + b"]" * 5000), "the body nests too deeply"),
        (
            _GOOD.replace(b'"deadline":5', b'"deadline":' + b"9" * 5000),
            "an integer with too many digits",
        ),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else None,
)
def test_a_body_that_is_not_a_strict_json_object_is_400_saying_why(
    untouched: FaultExecutor, payload: bytes, said: str
) -> None:
    """All of these were ``400 BAD_REQUEST`` "the body is not valid JSON" (or "must be a
    JSON object"), whatever was wrong: now the message says what, naming a repeated member
    by its JSON Pointer — and never quotes the body."""
    executor = untouched
    headers = signed(executor, payload)
    answer = send(executor, payload, headers)
    message = refused(executor, answer, 400, "BAD_REQUEST", nonce=headers[NONCE_HEADER])
    assert said in message, message
    for quoted in ("c-other", "pen", "ink"):  # the body is never quoted
        assert quoted not in message


@pytest.mark.parametrize(
    ("members", "reason", "said"),
    [
        (
            {"arguments": {"item": "pen", "extra": json.loads("[" * 900 + "]" * 900)}},
            "ARGS_TOO_DEEP",
            "arguments nest deeper than 64 levels",
        ),
        (
            {"tool": {**call()["tool"], "x": 2**64}},
            "BAD_REQUEST",
            "an integer beyond ±9007199254740991 (JSON numbers keep no more exactly) at /tool/x",
        ),
        ({"deadline": 10**400}, "BAD_REQUEST", "deadline is out of range"),
        ({"call_id": "c" * 257}, "BAD_REQUEST", "call_id must be a non-empty string of at most"),
    ],
    ids=["deep-arguments", "huge-integer-in-tool", "huge-deadline", "long-call-id"],
)
def test_values_no_json_peer_can_hold_are_400_not_500(
    untouched: FaultExecutor, members: dict[str, Any], reason: str, said: str
) -> None:
    """Arguments nested 900 deep crashed the schema validator, a 2**64 in ``tool`` the
    request digest, a 400-digit deadline the float conversion: each was a bare 500 (read as
    "may have run", so a write became ``unknown``). Now each is a signed 400 naming the
    member, the arguments held to the kernel's own intake rules."""
    executor = untouched
    doc = call(**members)
    payload = dumps(doc)
    headers = signed(executor, payload)
    answer = send(executor, payload, headers)
    message = refused(executor, answer, 400, reason, nonce=headers[NONCE_HEADER], echoed=doc)
    assert said in message, message


# ------------------------------------------------------------------------------------------
# size and time


def _raw(executor: FaultExecutor, head: bytes, chunks: Iterator[bytes] | list[bytes]) -> bytes:
    """Send a request byte for byte; the answer (as much as arrives), or b"" if none."""
    host, port = executor.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        try:
            for chunk in chunks:
                sock.sendall(chunk)
        except OSError:
            pass  # the executor answered and closed: what it said is still to be read
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
                if b"\r\n\r\n" in answer and answer.endswith(b"}}"):
                    break
        except OSError:
            pass
        return answer


def _head(executor: FaultExecutor, length: str) -> bytes:
    headers = signed(executor, b"")  # its signature cannot match: refused before that
    lines = [f"{k}: {v}" for k, v in headers.items()]
    return (
        "POST /execute HTTP/1.1\r\nHost: executor\r\nContent-Type: application/json\r\n"
        + "".join(line + "\r\n" for line in lines)
        + length
        + "\r\n\r\n"
    ).encode()


def test_an_oversized_body_is_413_naming_the_limit_before_it_is_read(
    untouched: FaultExecutor,
) -> None:
    executor = untouched
    started = time.monotonic()
    declared = _raw(executor, _head(executor, f"Content-Length: {64 * 1024 * 1024}"), [])
    assert declared.startswith(b"HTTP/1.1 413 "), declared[:200]
    assert time.monotonic() - started < 10  # answered without waiting for 64 MiB
    chunk = b"%x\r\n" % 65536 + b"[" * 65536 + b"\r\n"
    chunked = _raw(executor, _head(executor, "Transfer-Encoding: chunked"), [chunk] * 128)
    assert chunked.startswith(b"HTTP/1.1 413 "), chunked[:200]
    for answer in (declared, chunked):
        error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
        assert error == {
            "code": "resource_limit",
            "reason": "BODY_TOO_LARGE",
            "message": "the request body is larger than 1048576 bytes",
        }


@pytest.fixture(scope="module")
def impatient_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultExecutor]:
    """A second executor process whose app waits 1 s for a request body."""
    with running_executor(
        tmp_path_factory.mktemp("impatient-executor"), FAULT_BODY_TIMEOUT_S="1"
    ) as executor:
        yield executor


def test_a_body_sent_too_slowly_is_408_and_nothing_runs(
    impatient_executor: FaultExecutor,
) -> None:
    """A body that never arrives whole held its request (and a slot of the server) for as
    long as the caller liked; no credential is needed to do that, since the signature is
    checked over the whole body. Now it is ``408 BODY_TIMEOUT`` and the connection closes."""
    executor = impatient_executor
    started = time.monotonic()
    answer = _raw(executor, _head(executor, "Content-Length: 1000") + b'{"call_id": ', [])
    waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"\r\nconnection: close\r\n" in answer.lower()
    assert 0.9 <= waited < 10
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["reason"] == "BODY_TIMEOUT"
    assert error["message"] == "the request body did not arrive whole within 1 seconds"
    assert executor.effects() == 0
    assert executor.executions() == 0
    payload = dumps(call())  # sent at once, a call is well within the time
    assert send(executor, payload).json()["status"] == "succeeded"


def test_a_client_gone_mid_body_leaves_no_traceback(untouched: FaultExecutor) -> None:
    """The executor logged ``Exception in ASGI application`` and a ClientDisconnect
    traceback for every client that went away mid-body."""
    executor = untouched
    before = executor.log.read_text(errors="replace").count("Traceback")
    host, port = executor.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(_head(executor, "Content-Length: 1000") + b'{"call_id": ')
        time.sleep(0.3)
    time.sleep(0.5)
    assert send(executor, b"null").status_code == 400  # still serving; nothing ran
    assert executor.log.read_text(errors="replace").count("Traceback") == before


# ------------------------------------------------------------------------------------------
# credential headers


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("Authorization", "EXECUTOR_AUTH_INVALID"),
        (SIGNATURE_HEADER, "SIGNATURE_INVALID"),
        (NONCE_HEADER, "SIGNATURE_INVALID"),
        (TIMESTAMP_HEADER, "SIGNATURE_INVALID"),
    ],
)
@pytest.mark.parametrize("order", ["intruder first", "intruder second", "same value twice"])
def test_a_credential_header_sent_twice_is_401_naming_it(
    untouched: FaultExecutor, header: str, reason: str, order: str
) -> None:
    """With two ``Authorization`` or two ``X-Charter-Signature`` headers the first won: a
    valid one first let the request run, whatever followed (a proxy may have read the
    other). Now either order is refused, and so is the same value twice."""
    executor = untouched
    doc = call()
    payload = dumps(doc)
    headers = signed(executor, payload)
    intruder = {
        "Authorization": "Bearer intruder-credential-0123456789",
        SIGNATURE_HEADER: "v1=" + "0" * 64,
        NONCE_HEADER: "f" * 32,
        TIMESTAMP_HEADER: str(int(time.time()) - 1),
    }[header]
    pair = {
        "intruder first": [intruder, headers[header]],
        "intruder second": [headers[header], intruder],
        "same value twice": [headers[header], headers[header]],
    }[order]
    sent = [(k, v) for k, v in headers.items() if k != header] + [(header, v) for v in pair]
    answer = send(executor, payload, sent)
    # a repeated nonce header: the answer is signed over the first one sent
    nonce = pair[0] if header == NONCE_HEADER else headers[NONCE_HEADER]
    message = refused(executor, answer, 401, reason, nonce=nonce, echoed=doc)
    assert message == f"the {header} header was sent 2 times"
    assert answer.json()["error"]["code"] == "permission_denied"
    assert headers[NONCE_HEADER] not in nonces(executor)


def test_describe_refuses_a_credential_header_sent_twice(executor: FaultExecutor) -> None:
    headers = signed(executor, b"", "/describe")
    sent = [*headers.items(), ("Authorization", headers["Authorization"])]
    answer = httpx2.get(f"{executor.url}/describe", headers=sent, timeout=30)
    message = refused(executor, answer, 401, "EXECUTOR_AUTH_INVALID", nonce=headers[NONCE_HEADER])
    assert message == "the Authorization header was sent 2 times"


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        (SIGNATURE_HEADER, f"the request has no {SIGNATURE_HEADER} header"),
        (NONCE_HEADER, f"the request has no {NONCE_HEADER} header"),
    ],
)
def test_a_missing_signature_header_is_named(
    untouched: FaultExecutor, missing: str, said: str
) -> None:
    executor = untouched
    doc = call()
    payload = dumps(doc)
    headers = signed(executor, payload)
    nonce = headers[NONCE_HEADER]
    del headers[missing]
    answer = send(executor, payload, headers)
    shown_nonce = "" if missing == NONCE_HEADER else nonce
    message = refused(executor, answer, 401, "SIGNATURE_INVALID", nonce=shown_nonce, echoed=doc)
    assert message == said


def test_a_nonce_of_the_wrong_form_is_named(untouched: FaultExecutor) -> None:
    executor = untouched
    doc = call()
    payload = dumps(doc)
    headers = signed(executor, payload)
    headers[NONCE_HEADER] = headers[NONCE_HEADER].upper()
    answer = send(executor, payload, headers)
    nonce = headers[NONCE_HEADER]
    message = refused(executor, answer, 401, "SIGNATURE_INVALID", nonce=nonce, echoed=doc)
    assert message == f"the {NONCE_HEADER} header must be 32 lower-case hex digits"


# ------------------------------------------------------------------------------------------
# replays


def test_a_request_replayed_at_the_same_moment_runs_once(executor: FaultExecutor) -> None:
    """Ten copies of one signed request, sent together: the nonce is claimed in the
    journal's primary key, so one runs and nine are ``401 REQUEST_REPLAYED``."""
    effects, executions = executor.effects(), executor.executions()
    payload = dumps(call())
    headers = signed(executor, payload)
    answers: list[httpx2.Response] = []
    lock = threading.Lock()

    def one() -> None:
        answer = send(executor, payload, headers)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [401] * 9
    replays = [a for a in answers if a.status_code == 401]
    assert {a.json()["error"]["reason"] for a in replays} == {"REQUEST_REPLAYED"}
    assert executor.effects() == effects + 1
    assert executor.executions() == executions + 1


def test_a_replay_of_a_refused_request_is_still_a_replay(untouched: FaultExecutor) -> None:
    executor = untouched
    doc = call(deadline=-1)
    payload = dumps(doc)
    headers = signed(executor, payload)
    assert send(executor, payload, headers).status_code == 408  # DEADLINE_PASSED
    again = send(executor, payload, headers)
    nonce = headers[NONCE_HEADER]
    refused(executor, again, 401, "REQUEST_REPLAYED", nonce=nonce, echoed=doc)


# ------------------------------------------------------------------------------------------
# the journal


@pytest.mark.parametrize(
    ("item", "said"),
    [
        ("garbled", "tool shop.order raised ValueError: no such item: caf\\udce9"),
        ("unprintable", "tool shop.order raised _Unprintable (its message could not be read)"),
    ],
)
def test_a_tool_failure_that_cannot_be_encoded_is_recorded_not_left_running(
    executor: FaultExecutor, item: str, said: str
) -> None:
    """A tool whose exception message held a lone surrogate (or whose ``str()`` raised)
    made the answer unencodable: a bare 500, and the key's journal row left ``running`` —
    every retry then waited 30 s for ``503 IN_FLIGHT``. Now the message is escaped, the
    failure recorded, and a retry gets the recorded answer at once."""
    running = _running(executor.journal)
    key = uuid.uuid4().hex
    payload = dumps(call(key, arguments={"item": item}))
    first = send(executor, payload)
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "failed"
    assert first.json()["error"]["reason"] == "TOOL_RAISED"
    assert first.json()["error"]["message"] == said
    assert _running(executor.journal) == running
    started = time.monotonic()
    again = send(executor, payload)
    assert (again.status_code, again.content) == (200, first.content)
    assert time.monotonic() - started < 5


def _running(journal: Path) -> int:
    db = sqlite3.connect(journal)
    try:
        return int(
            db.execute("SELECT count(*) FROM executions WHERE state = 'running'").fetchone()[0]
        )
    finally:
        db.close()
