"""The executor side of charter.executor.v1: authentication, signatures, replays, the
idempotency journal — spoken to directly over HTTP, as an attacker or a buggy client would."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx2
import pytest

from charter.contracts.decorator import declared_contract
from charter.executors.http_protocol import dumps, signed_headers
from tests.executors_http import fault_tools
from tests.executors_http.conftest import FaultExecutor

ORDER = declared_contract(fault_tools.order)


def body(key: str, *, item: str = "pen", digest: str | None = None) -> bytes:
    return dumps(
        {
            "call_id": "c-" + key,
            "idempotency_key": key,
            "tool": {
                "id": ORDER.id,
                "version": ORDER.version,
                "contract_digest": digest or ORDER.digest,
            },
            "arguments": {"item": item},
            "deadline": 5,
            "attribution": {"tenant": "t1", "principal": "app", "run_id": "r", "context_id": "x"},
        }
    )


def post(
    executor: FaultExecutor,
    payload: bytes,
    *,
    credential: str | None = None,
    signing_key: str | None = None,
    now: float | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    sent = headers or signed_headers(
        credential=(credential or executor.credential).encode(),
        signing_key=(signing_key or executor.signing_key).encode(),
        method="POST",
        path="/execute",
        body=payload,
        now=time.time() if now is None else now,
    )
    return httpx2.post(f"{executor.url}/execute", content=payload, headers=sent, timeout=10)


def reason(response: httpx2.Response) -> Any:
    return response.json()["error"]["reason"]


def test_a_signed_request_runs_once(executor: FaultExecutor) -> None:
    before = executor.effects()
    response = post(executor, body(uuid.uuid4().hex))
    assert response.status_code == 200
    assert response.json()["status"] == "succeeded"
    assert executor.effects() == before + 1


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        ("signing_key", "SIGNATURE_INVALID"),
        ("credential", "EXECUTOR_AUTH_INVALID"),
        ("missing_auth", "EXECUTOR_AUTH_MISSING"),
        ("stale", "TIMESTAMP_STALE"),
        ("body", "SIGNATURE_INVALID"),
    ],
)
def test_the_executor_refuses_bad_requests(
    executor: FaultExecutor, tamper: str, expected: str
) -> None:
    before = executor.effects()
    payload = body(uuid.uuid4().hex)
    if tamper == "signing_key":
        response = post(executor, payload, signing_key="another-signing-key-0123456789")
    elif tamper == "credential":
        response = post(executor, payload, credential="another-credential-0123456789")
    elif tamper == "stale":
        response = post(executor, payload, now=time.time() - 3600)
    else:
        headers = signed_headers(
            credential=executor.credential.encode(),
            signing_key=executor.signing_key.encode(),
            method="POST",
            path="/execute",
            body=payload,
            now=time.time(),
        )
        if tamper == "missing_auth":
            del headers["Authorization"]
        else:
            payload = payload.replace(b'"pen"', b'"gun"')
        response = post(executor, payload, headers=headers)
    assert response.status_code == 401
    assert reason(response) == expected
    assert executor.effects() == before


def test_a_replayed_request_is_refused_and_the_effect_counted_once(
    executor: FaultExecutor,
) -> None:
    before = executor.effects()
    payload = body(uuid.uuid4().hex)
    headers = signed_headers(
        credential=executor.credential.encode(),
        signing_key=executor.signing_key.encode(),
        method="POST",
        path="/execute",
        body=payload,
        now=time.time(),
    )
    first = post(executor, payload, headers=headers)
    assert first.status_code == 200
    replay = post(executor, payload, headers=headers)
    assert replay.status_code == 401
    assert reason(replay) == "REQUEST_REPLAYED"
    assert executor.effects() == before + 1


def test_the_same_idempotency_key_gets_the_recorded_response(executor: FaultExecutor) -> None:
    before = executor.effects()
    key = uuid.uuid4().hex
    first = post(executor, body(key))
    second = post(executor, body(key))  # freshly signed: not a replay, a duplicate
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert executor.effects() == before + 1
    other = post(executor, body(key, item="ink"))
    assert other.status_code == 409
    assert reason(other) == "IDEMPOTENCY_CONFLICT"
    assert executor.effects() == before + 1


def test_a_tool_that_exits_is_a_recorded_failure_not_a_dead_request(
    executor: FaultExecutor,
) -> None:
    """``sys.exit()`` in a tool is its failure: answered and journalled like any exception
    (it was a bare 500 and an unfinished journal claim)."""
    key = uuid.uuid4().hex
    first = post(executor, body(key, item="exit"))
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "failed"
    assert reason(first) == "TOOL_RAISED"
    assert first.json()["error"]["message"] == "tool shop.order raised SystemExit: 3"
    again = post(executor, body(key, item="exit"))
    assert (again.status_code, again.content) == (200, first.content)
    assert post(executor, body(uuid.uuid4().hex)).status_code == 200  # still serving


def test_a_contract_mismatch_is_refused_before_running(executor: FaultExecutor) -> None:
    before = executor.effects()
    response = post(executor, body(uuid.uuid4().hex, digest="sha256:" + "1" * 64))
    assert response.status_code == 409
    assert reason(response) == "CONTRACT_MISMATCH"
    assert executor.effects() == before


def test_describe_needs_a_signature_and_lists_the_tools(executor: FaultExecutor) -> None:
    assert httpx2.get(f"{executor.url}/describe", timeout=10).status_code == 401
    headers = signed_headers(
        credential=executor.credential.encode(),
        signing_key=executor.signing_key.encode(),
        method="GET",
        path="/describe",
        body=b"",
        now=time.time(),
    )
    doc = json.loads(httpx2.get(f"{executor.url}/describe", headers=headers, timeout=10).content)
    assert doc["protocol"] == "charter.executor.v1"
    assert doc["executor"] == {"name": "fault-executor", "version": "0.0.1"}
    tools = {t["id"]: t for t in doc["tools"]}
    assert tools["shop.order"] == {
        "id": "shop.order",
        "version": ORDER.version,
        "contract_digest": ORDER.digest,
    }
