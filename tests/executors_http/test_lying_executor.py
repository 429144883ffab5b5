"""An executor that lies or breaks in ways the protocol tables do not spell out one by one:
the answer is read without a traceback, and a write's outcome is never claimed ``failed``
when its effect happened."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.runtime import Runtime
from tests.executors_http.conftest import FaultExecutor, approved_call, audit_lines

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
