"""ServerState's run-to-tenant lookup: from the run row, remembered for a bounded number of runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.runtime import open_runtime
from charter.server.state import ServerState
from tests.server._harness import write_served_project


@pytest.mark.anyio
async def test_run_tenants_come_from_the_run_row_and_the_cache_is_bounded(
    tmp_path: Path,
) -> None:
    write_served_project(tmp_path)
    async with open_runtime(tmp_path) as rt:
        state = ServerState(
            runtime=rt,
            authenticator=None,  # type: ignore[arg-type]  # not used by run_tenant
            ledger_key=None,
            run_tenant_cache=2,
        )
        runs = []
        for who in rt.deployment.principals:
            ctx = await rt.resolve_context(who, next(iter(rt.build.profiles)))
            runs.append((ctx.run_id, rt.principal(who).tenant))
        assert len(runs) >= 3
        for run_id, tenant in runs:
            assert await state.run_tenant(run_id) == tenant
        assert list(state._run_tenants) == [r for r, _ in runs[-2:]]  # the newest two kept
        assert await state.run_tenant("run-nobody") is None
        assert "run-nobody" not in state._run_tenants  # a missing run is not remembered
