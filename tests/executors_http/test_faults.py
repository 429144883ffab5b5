"""Executor fault tests: a real executor process (uvicorn, loopback) the test switches."""

from __future__ import annotations

import pytest

from charter.runtime import Runtime
from tests.executors_http.conftest import FaultExecutor, approved_call

pytestmark = pytest.mark.anyio


async def test_read_and_write_succeed_and_the_effect_is_counted_once(
    rt: Runtime, executor: FaultExecutor
) -> None:
    before = executor.effects()
    ctx = await rt.resolve_context("app", "shopper")
    assert {t.id for t in ctx.tools} == {"shop.lookup", "shop.order"}
    read = await rt.call(ctx.context_id, "shop.lookup", "r1", {"item": "pen"}, as_="app")
    assert read.status.value == "succeeded"
    assert read.data == {"item": "pen", "stock": 3}
    write = await approved_call(rt, ctx.context_id, "shop.order", "w1", {"item": "pen"})
    assert write.status.value == "succeeded", write.error
    assert write.data["ordered"] == "pen"
    again = await rt.call(ctx.context_id, "shop.order", "w1", {"item": "pen"}, as_="app")
    assert again.metrics.cached
    assert executor.effects() == before + 1


async def test_slow_within_the_deadline_succeeds(rt: Runtime, executor: FaultExecutor) -> None:
    executor.mode("slow")
    ctx = await rt.resolve_context("app", "shopper")
    env = await approved_call(rt, ctx.context_id, "shop.order", "slow-1", {"item": "ink"})
    assert env.status.value == "succeeded", env.error


async def test_a_hanging_executor_makes_a_write_unknown(
    rt: Runtime, executor: FaultExecutor
) -> None:
    executor.mode("hang")
    ctx = await rt.resolve_context("app", "shopper")
    env = await approved_call(rt, ctx.context_id, "shop.order", "hang-1", {"item": "ink"})
    assert env.status.value == "unknown"
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("timeout", "TIMEOUT")


async def test_500_on_a_write_tool_is_unknown(rt: Runtime, executor: FaultExecutor) -> None:
    executor.mode("500")
    ctx = await rt.resolve_context("app", "shopper")
    env = await approved_call(rt, ctx.context_id, "shop.order", "e500", {"item": "ink"})
    assert env.status.value == "unknown"
    assert env.error is not None
    assert env.error["reason"] == "EXECUTOR_ERROR"


async def test_500_on_a_read_tool_fails_after_the_kernel_retries(
    rt: Runtime, executor: FaultExecutor
) -> None:
    executor.mode("500")
    ctx = await rt.resolve_context("app", "shopper")
    env = await rt.call(ctx.context_id, "shop.lookup", "r500", {"item": "pen"}, as_="app")
    assert env.status.value == "failed"
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("transient_external", "EXECUTOR_ERROR")
    assert env.metrics.attempts > 1  # read-only idempotent: the kernel retried


async def test_400_is_failed_with_the_executors_reason(
    rt: Runtime, executor: FaultExecutor
) -> None:
    executor.mode("400")
    ctx = await rt.resolve_context("app", "shopper")
    env = await approved_call(rt, ctx.context_id, "shop.order", "e400", {"item": "ink"})
    assert env.status.value == "failed"
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("invalid_input", "ITEM_UNKNOWN")


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("malformed", "EXECUTOR_MALFORMED_RESPONSE"), ("wrong_call_id", "CALL_ID_MISMATCH")],
)
async def test_bad_answers_to_a_write_are_unknown(
    rt: Runtime, executor: FaultExecutor, mode: str, reason: str
) -> None:
    executor.mode(mode)
    ctx = await rt.resolve_context("app", "shopper")
    env = await approved_call(rt, ctx.context_id, "shop.order", f"bad-{mode}", {"item": "ink"})
    assert env.status.value == "unknown"
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("contract_violation", reason)


async def test_a_result_breaking_the_result_schema_is_a_contract_violation(
    rt: Runtime, executor: FaultExecutor
) -> None:
    ctx = await rt.resolve_context("app", "shopper")
    env = await rt.call(ctx.context_id, "shop.lookup", "shape", {"item": "bad-shape"}, as_="app")
    assert env.status.value == "failed"
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == (
        "contract_violation",
        "RESULT_SCHEMA_MISMATCH",
    )


async def test_an_oversized_answer_is_refused(rt: Runtime, executor: FaultExecutor) -> None:
    executor.mode("oversized")
    ctx = await rt.resolve_context("app", "shopper")
    read = await rt.call(ctx.context_id, "shop.lookup", "big-r", {"item": "ink"}, as_="app")
    assert read.status.value == "failed"
    assert read.error is not None
    assert read.error["reason"] == "RESPONSE_TOO_LARGE"
    env = await approved_call(rt, ctx.context_id, "shop.order", "big", {"item": "ink"})
    assert env.status.value == "unknown"
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("contract_violation", "RESPONSE_TOO_LARGE")


async def test_a_redirect_is_not_followed(rt: Runtime, executor: FaultExecutor) -> None:
    executor.mode("redirect")
    before = executor.effects()
    ctx = await rt.resolve_context("app", "shopper")
    env = await approved_call(rt, ctx.context_id, "shop.order", "redir", {"item": "ink"})
    assert env.status.value == "failed"
    assert env.error is not None
    assert env.error["reason"] == "EXECUTOR_REDIRECT"
    assert executor.effects() == before


async def test_connection_refused_is_failed_and_not_dispatched() -> None:
    from charter.contracts.model import ToolContract
    from charter.contracts.tool_context import Context
    from charter.executors.http import HttpEndpoint, HttpExecutor
    from charter.kernel.executor_port import ExecutionRequest
    from tests.executors_http.conftest import free_port

    endpoint = HttpEndpoint(
        url=f"http://127.0.0.1:{free_port()}", credential=b"c" * 32, signing_key=b"s" * 32
    )
    from charter.executors.egress import EgressPolicy

    executor = HttpExecutor(
        endpoints={"shop.order": endpoint},
        redact_message=lambda m, r: m,
        egress=EgressPolicy.parse(["127.0.0.1"]),
    )
    try:
        outcome = await executor.execute(
            ExecutionRequest(
                contract=ToolContract(id="shop.order", description="d", effect="write"),
                arguments={"item": "ink"},
                context=Context(
                    call_id="c1", idempotency_key="k1", context_id="x", run_id="r", tool_id="t"
                ),
                deadline_s=5,
            )
        )
    finally:
        await executor.aclose()
    assert (outcome.status, outcome.dispatched, outcome.reason) == (
        "failed",
        False,
        "EXECUTOR_UNREACHABLE",
    )
