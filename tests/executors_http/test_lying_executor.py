"""An executor that lies or breaks in ways the protocol tables do not spell out one by one:
the answer is read without a traceback, and a write's outcome is never claimed ``failed``
when its effect happened."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import anyio
import httpx2
import pytest

import charter
import charter.errors
from charter.executors.http import DESCRIBE_TIMEOUT_S
from charter.executors.http_protocol import answer_signature_matches, response_signature
from charter.runtime import Runtime
from tests.executors_http.conftest import (
    FaultExecutor,
    approved_call,
    audit_lines,
    write_project,
)

pytestmark = pytest.mark.anyio


async def test_a_failure_whose_details_nest_too_deep_is_recorded_without_them(
    rt: Runtime, project: Path, executor: FaultExecutor
) -> None:
    """A signed ``status: failed`` whose ``error.details`` nest 600 levels deep: the call is
    ``failed`` with the executor's reason (the details dropped), not a RecursionError."""
    ctx = await rt.resolve_context("app", "shopper")
    executor.mode("deep_error")
    env = await approved_call(rt, ctx.context_id, "shop.order", "deep-1", {"item": "ink"})
    assert env.status.value == "failed", env.error
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("internal", "DEEP")
    assert env.error.get("details", {}) == {}
    assert [(a["outcome"], a["reason"]) for a in audit_lines(project, "deep-1")][-1] == (
        "failed",
        "DEEP",
    )


async def test_a_reason_that_is_prose_is_not_kept_as_a_reason(
    rt: Runtime, executor: FaultExecutor
) -> None:
    """An executor's ``reason`` is a code: ``"FAILED: SAFE TO RETRY\nOK"`` (upper case, so it
    passed the old ``isupper`` check, with a colon, spaces and a newline) is recorded as
    ``EXECUTOR_FAILED``, the executor's message kept as the message."""
    ctx = await rt.resolve_context("app", "shopper")
    executor.mode("loose_reason")
    env = await rt.call(ctx.context_id, "shop.lookup", "loose-1", {"item": "pen"}, as_="app")
    assert env.status.value == "failed", env
    assert env.error is not None
    assert env.error["reason"] == "EXECUTOR_FAILED"
    assert "the warehouse API is throttling us" in env.error["message"]


async def test_a_write_that_ran_and_returned_no_json_is_unknown_and_never_repeated(
    rt: Runtime, project: Path, executor: FaultExecutor
) -> None:
    """``shop.order`` records its effect, then returns a set: ``charter.remote.app`` must not
    answer ``status: failed`` (a caller would retry with a new call id and order twice) — the
    write is ``unknown``, as the table of docs/executors.md says, and the executor's journal
    answers a duplicate of the key with the same in-doubt answer without running again."""
    ctx = await rt.resolve_context("app", "shopper")
    before, effects = executor.executions("shop.order"), executor.effects()
    env = await approved_call(rt, ctx.context_id, "shop.order", "odd-1", {"item": "odd-result"})
    assert env.status.value == "unknown", env.error
    assert env.error is not None
    assert env.error["reason"] == "EXECUTOR_ERROR"
    assert "may or may not have happened" in env.error["message"]
    assert executor.executions("shop.order") == before + 1
    assert executor.effects() == effects + 1
    assert [a["outcome"] for a in audit_lines(project, "odd-1")][-1] == "unknown"
    again = await rt.call(ctx.context_id, "shop.order", "odd-1", {"item": "odd-result"}, as_="app")
    assert (again.status.value, again.metrics.cached) == ("unknown", True)
    assert executor.effects() == effects + 1


async def test_a_body_the_executor_refuses_as_too_large_is_failed_not_unknown(
    rt: Runtime, project: Path, executor: FaultExecutor
) -> None:
    """Arguments just under the deployment's 1 MiB make an /execute body over the app's
    1 MiB: it answers a signed ``413 BODY_TOO_LARGE`` before reading the body, so its
    signature echoes an empty call id, key and digest (docs/executors.md). That answer is
    bound to the request by its nonce and is a refusal: ``failed``, nothing ran — not an
    unverified answer that leaves the write ``unknown``."""
    ctx = await rt.resolve_context("app", "shopper")
    before = executor.executions("shop.order")
    item = "x" * (1024 * 1024 - 64)
    env = await approved_call(rt, ctx.context_id, "shop.order", "big-args", {"item": item})
    assert env.status.value == "failed", env.error
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("resource_limit", "BODY_TOO_LARGE")
    assert executor.executions("shop.order") == before
    assert [a["outcome"] for a in audit_lines(project, "big-args")][-1] == "failed"


@pytest.mark.parametrize(
    ("status", "believed"), [(413, True), (400, True), (200, False), (500, False)]
)
def test_only_a_refusal_may_be_signed_over_empty_fields(status: int, believed: bool) -> None:
    key, nonce, body = b"k" * 32, "0" * 32, b"{}"
    empty = response_signature(
        key,
        status=status,
        call_id="",
        idempotency_key="",
        contract_digest="",
        nonce=nonce,
        body=body,
    )
    fields = {"call_id": "c1", "idempotency_key": "k1", "contract_digest": "sha256:" + "a" * 64}
    assert (
        answer_signature_matches(key, empty, status=status, nonce=nonce, body=body, **fields)
        is believed
    )
    other = response_signature(
        key, status=status, nonce="1" * 32, body=body, **fields | {"call_id": ""}
    )
    assert not answer_signature_matches(key, other, status=status, nonce=nonce, body=body, **fields)


async def test_a_binding_sharing_a_url_is_checked_with_its_own_signing_key(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    """Both tools on one URL; ``shop.order``'s binding holds a stale signing key (a rotation
    done on one binding only). Readiness described the URL once, with ``shop.lookup``'s
    keys, and called ``shop.order`` ready — so every approved order went out, was refused 401
    by the executor in a signature Charter could not verify, and ended ``unknown``. Now
    each binding's keys are checked: ``shop.order`` is not ready and nothing is sent."""
    project = write_project(
        tmp_path / "shop", executor.url, executor.credential, executor.signing_key
    )
    (project / "secrets" / "signing-old").write_text(secrets.token_hex(24) + "\n")
    deploy = project / "charter.deploy.yaml"
    lines = deploy.read_text().splitlines()
    lines = [
        line.replace("secrets/signing}", "secrets/signing-old}")
        if line.startswith("  shop.order:")
        else line
        for line in lines
    ]
    deploy.write_text("\n".join(lines) + "\n")
    before = executor.executions("shop.order")
    async with charter.open(project, store="memory:") as rt:
        report = {t.tool_id: t for t in (await rt.readiness(fresh=True)).tools}
        assert report["shop.lookup"].ready
        assert not report["shop.order"].ready
        assert report["shop.order"].reason == "EXECUTOR_REFUSED"  # its 401 to our signature
        with pytest.raises(charter.errors.TransientExternal) as refused:
            await rt.resolve_context("app", "shopper")
        assert refused.value.reason == "TOOL_NOT_READY"
    assert executor.executions("shop.order") == before


class _SilentDns:
    """The resolver seam: the name first resolves to the executor, then DNS goes silent."""

    def __init__(self) -> None:
        self.silent = False

    async def __call__(self, host: str, port: int) -> list[str]:
        if self.silent:
            await anyio.sleep_forever()
        return ["127.0.0.1"]


async def test_a_silent_dns_server_makes_the_tool_not_ready_within_the_describe_timeout(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    """Readiness re-resolves the executor's name before each describe; when DNS stops
    answering, the describe's 5 s bound covers the resolution too: the tool is not ready
    (``EXECUTOR_UNREACHABLE``), and a call is refused before its intent, instead of every
    context resolution and call waiting on the resolver."""
    url = executor.url.replace("127.0.0.1", "executor.test")
    project = write_project(tmp_path / "named", url, executor.credential, executor.signing_key)
    dns = _SilentDns()
    async with charter.open(project, store="memory:") as rt:
        rt.kernel.executors["http"].resolver = dns  # type: ignore[attr-defined]
        ctx = await rt.resolve_context("app", "shopper")
        dns.silent = True
        before = executor.executions("shop.lookup")
        with anyio.fail_after(DESCRIBE_TIMEOUT_S + 3):
            report = await rt.readiness(fresh=True)
        state = report.get("shop.lookup")
        assert state is not None
        assert (state.ready, state.reason) == (False, "EXECUTOR_UNREACHABLE")
        assert "executor.test" in (state.message or "")
        env = await rt.call(ctx.context_id, "shop.lookup", "dns-1", {"item": "pen"}, as_="app")
        assert env.status.value == "failed"
        assert env.error is not None
        assert env.error["reason"] == "TOOL_NOT_READY"
        assert executor.executions("shop.lookup") == before


async def test_a_silent_dns_server_bounds_a_downstream_mcp_url_server_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ``executor: mcp`` binding by url whose host name's DNS stops answering: its
    listing (readiness) fails within the listing timeout, and a call within its deadline —
    ``failed``, nothing sent — instead of waiting on the resolver."""
    from charter.contracts.model import ToolContract
    from charter.contracts.tool_context import Context
    from charter.executors import mcp
    from charter.executors.egress import EgressPolicy
    from charter.kernel.executor_port import ExecutionRequest

    monkeypatch.setattr(mcp, "LIST_TIMEOUT_S", 0.5)
    contract = ToolContract.model_validate(
        {
            "id": "up.lookup",
            "description": "Look a key up.",
            "effect": "write",
            "upstream": {"server": "up", "name": "lookup", "digest": "sha256:" + "0" * 64},
        }
    )
    dns = _SilentDns()
    dns.silent = True
    executor = mcp.McpExecutor(
        servers={"up.lookup": mcp.McpServerSpec(url="http://executor.test:9/mcp")},
        redact_message=lambda m, r: m,
        egress=EgressPolicy.parse(["127.0.0.1/32"]),
        resolver=dns,
    )
    try:
        with anyio.fail_after(5):
            problems = await executor.readiness([contract])
        assert getattr(problems["up.lookup"], "reason", None) == "EXECUTOR_UNREACHABLE"
        with anyio.fail_after(5):
            outcome = await executor.execute(
                ExecutionRequest(
                    contract=contract,
                    arguments={"key": "k"},
                    context=Context(
                        call_id="c1", idempotency_key="k1", context_id="x", run_id="r", tool_id="t"
                    ),
                    deadline_s=0.5,
                )
            )
        assert (outcome.status, outcome.dispatched, outcome.reason) == (
            "failed",
            False,
            "EXECUTOR_UNREACHABLE",
        )
    finally:
        await executor.aclose()


async def test_an_executor_quoting_the_binding_secrets_never_gets_them_recorded(
    rt: Runtime, project: Path, executor: FaultExecutor
) -> None:
    """A refusal whose message and details quote the bearer credential and the signing key:
    neither reaches the envelope, the audit file or the run's ledger."""
    ctx = await rt.resolve_context("app", "shopper")
    executor.mode("echo_secrets")
    env = await approved_call(rt, ctx.context_id, "shop.order", "echo-1", {"item": "ink"})
    assert env.status.value == "failed", env.error
    assert env.error is not None
    assert env.error["reason"] == "ECHO"
    assert env.run_id is not None
    events = [e.data for e in await rt.store.read_stored(env.run_id)]
    surfaces = {
        "envelope": json.dumps(env.to_dict()),
        "audit": (project / "audit.jsonl").read_text(),
        "ledger": json.dumps(events, default=str),
    }
    for where, text in surfaces.items():
        assert executor.credential not in text, where
        assert executor.signing_key not in text, where


async def test_a_refused_describe_says_what_the_executor_refused(
    rt: Runtime, executor: FaultExecutor
) -> None:
    """Charter's clock is 20 minutes behind the executor's: every signed request is refused
    ``401 TIMESTAMP_STALE``. Readiness said only "refused our credentials (HTTP 401)" —
    sending the operator to rotate keys that are fine; it now quotes the executor's signed
    reason, saying what it means."""
    http = rt.kernel.executors["http"]
    http._clock = lambda: time.time() - 1200  # type: ignore[attr-defined]
    state = (await rt.readiness(fresh=True)).get("shop.order")
    assert state is not None
    assert (state.ready, state.reason) == (False, "EXECUTOR_REFUSED")
    assert "TIMESTAMP_STALE" in (state.message or "")
    assert "clocks" in (state.message or "")


def test_an_executor_reporting_rate_limited_is_not_answered_429(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    """The executor's backend throttles it and it says so: a signed ``status: failed`` /
    ``RATE_LIMITED``. The call is recorded ``failed`` (the same call id never runs again),
    so the HTTP API answers it as any failed call — 200 — not 429 with ``Retry-After``,
    which is for Charter's own limit refusals (``denied``, nothing recorded): a client
    honouring Retry-After would re-send the same call id forever for the same receipt."""
    from charter.runtime import open_runtime
    from charter.server import create_app
    from tests.server._harness import ThreadServer

    project = write_project(
        tmp_path / "shop", executor.url, executor.credential, executor.signing_key
    )
    executor.mode("rate_limited")
    key = (project / "secrets" / "app").read_text().strip()

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project, store="sqlite:///.charter/charter.db")

    with (
        ThreadServer(create_app(opener=opener)) as live,
        httpx2.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as http,
    ):
        ctx = http.post("/v1/contexts", json={"profile": "shopper"}).json()["context_id"]
        body = {"tool": "shop.lookup", "call_id": "rl-1", "arguments": {"item": "pen"}}
        for _ in range(2):  # the first answer, then the recorded receipt
            answer = http.post(f"/v1/contexts/{ctx}/calls", json=body)
            assert answer.status_code == 200, answer.text
            assert "retry-after" not in answer.headers
            envelope = answer.json()
            assert envelope["status"] == "failed"
            assert envelope["error"]["reason"] == "RATE_LIMITED"
        metrics = http.get("/metrics").text
    assert 'charter_calls_total{status="failed",tool="shop.lookup"}' in metrics
    assert 'charter_limit_refusals_total{reason="RATE_LIMITED"' not in metrics
