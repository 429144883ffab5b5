"""Executor trust at call time, against a scripted executor on loopback (a real uvicorn
process that misbehaves on command and keeps its own execution journal): signed responses,
the outcome of every doubtful answer per effect, and the audit line of each."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from typer.testing import CliRunner

import charter
from charter.cli.app import app
from charter.contracts.decorator import declared_contract
from charter.errors import TransientExternal
from charter.executors.http_protocol import (
    RESPONSE_SIGNATURE_HEADER,
    dumps,
    response_signature,
    response_signature_matches,
    signed_headers,
)
from charter.ledger.verify import verify_run
from charter.runtime import Runtime, ledger_key_for
from tests.executors_http import fault_tools
from tests.executors_http.conftest import (
    HERE,
    REPO,
    FaultExecutor,
    approved_call,
    audit_lines,
    write_project,
)
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio

ORDER = declared_contract(fault_tools.order)


# ---------------------------------------------------------------------------------------
# the wire format: the documented test vector, and the executor helper signs


def _vector() -> dict[str, str]:
    text = (REPO / "docs" / "executors.md").read_text(encoding="utf-8")
    block = text.split("<!-- response-signature-vector -->", 1)[1].split("<!-- /", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| `(.*)` \|$", block, flags=re.MULTILINE)
    return dict(rows)


def test_the_documented_response_signature_vector_holds() -> None:
    v = _vector()
    body = v["body (UTF-8, exact bytes)"].encode()
    assert hashlib.sha256(body).hexdigest() == v["sha256 of the body"]
    computed = response_signature(
        v["signing key (UTF-8)"].encode(),
        status=int(v["status"]),
        call_id=v["call_id"],
        idempotency_key=v["idempotency_key"],
        contract_digest=v["contract_digest"],
        nonce=v["nonce"],
        body=body,
    )
    assert computed == v["header value"]


def test_the_executor_app_signs_every_answer_bound_to_the_request(
    executor: FaultExecutor,
) -> None:
    key = uuid.uuid4().hex
    payload = dumps(
        {
            "call_id": "sig-1",
            "idempotency_key": key,
            "tool": {"id": ORDER.id, "version": ORDER.version, "contract_digest": ORDER.digest},
            "arguments": {"item": "pen"},
            "deadline": 5,
        }
    )
    for signing_key, status in ((executor.signing_key, 200), ("w" * 32, 401)):
        headers = signed_headers(
            credential=executor.credential.encode(),
            signing_key=signing_key.encode(),
            method="POST",
            path="/execute",
            body=payload,
            now=time.time(),
        )
        response = httpx2.post(f"{executor.url}/execute", content=payload, headers=headers)
        assert response.status_code == status
        fields = {
            "status": status,
            "call_id": "sig-1",
            "idempotency_key": key,
            "contract_digest": ORDER.digest,
            "nonce": headers["X-Charter-Nonce"],
            "body": response.content,
        }
        offered = response.headers[RESPONSE_SIGNATURE_HEADER]
        assert response_signature_matches(executor.signing_key.encode(), offered, **fields)
        assert not response_signature_matches(
            executor.signing_key.encode(), offered, **{**fields, "call_id": "sig-2"}
        )
        assert not response_signature_matches(
            executor.signing_key.encode(), offered, **{**fields, "nonce": "0" * 32}
        )
        assert not response_signature_matches(
            executor.signing_key.encode(),
            offered,
            **{**fields, "contract_digest": "sha256:" + "2" * 64},
        )


# ---------------------------------------------------------------------------------------
# honest outcomes: each misbehaviour, per effect, with the journal and the audit line

WRITE_CASES = [
    ("unsigned", "RESPONSE_UNSIGNED"),
    ("bad_signature", "RESPONSE_SIGNATURE_INVALID"),
    ("wrong_digest", "RESPONSE_SIGNATURE_INVALID"),
    ("wrong_call_id", "CALL_ID_MISMATCH"),
    ("malformed", "EXECUTOR_MALFORMED_RESPONSE"),
    ("schema", "RESULT_SCHEMA_MISMATCH"),
    ("gzip", "EXECUTOR_CONTENT_ENCODING"),
    ("drop", "EXECUTOR_CONNECTION_LOST"),
]


@pytest.mark.parametrize(("mode", "reason"), WRITE_CASES)
async def test_a_write_whose_answer_is_in_doubt_is_unknown(
    rt: Runtime, project: Path, executor: FaultExecutor, mode: str, reason: str
) -> None:
    ctx = await rt.resolve_context("app", "shopper")
    before = executor.executions("shop.order")
    executor.mode(mode)
    call_id = f"w-{mode}"
    env = await approved_call(rt, ctx.context_id, "shop.order", call_id, {"item": "ink"})
    assert env.status.value == "unknown", env.error
    assert env.error is not None
    assert env.error["reason"] == reason
    assert executor.executions("shop.order") == before + 1  # it ran, once
    outcomes = [(a["outcome"], a["reason"]) for a in audit_lines(project, call_id)]
    assert outcomes[-1] == ("unknown", reason)
    executor.mode("ok")
    again = await rt.call(ctx.context_id, "shop.order", call_id, {"item": "ink"}, as_="app")
    assert (again.status.value, again.metrics.cached) == ("unknown", True)  # never re-sent
    assert executor.executions("shop.order") == before + 1


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("unsigned", "RESPONSE_UNSIGNED"),
        ("bad_signature", "RESPONSE_SIGNATURE_INVALID"),
        ("wrong_digest", "RESPONSE_SIGNATURE_INVALID"),
        ("wrong_call_id", "CALL_ID_MISMATCH"),
        ("malformed", "EXECUTOR_MALFORMED_RESPONSE"),
        ("schema", "RESULT_SCHEMA_MISMATCH"),
        ("gzip", "EXECUTOR_CONTENT_ENCODING"),
    ],
)
async def test_a_read_whose_answer_is_in_doubt_stays_failed(
    rt: Runtime, project: Path, executor: FaultExecutor, mode: str, reason: str
) -> None:
    ctx = await rt.resolve_context("app", "shopper")
    before = executor.executions("shop.lookup")
    executor.mode(mode)
    call_id = f"r-{mode}"
    env = await rt.call(ctx.context_id, "shop.lookup", call_id, {"item": "pen"}, as_="app")
    assert env.status.value == "failed", env.error
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == ("contract_violation", reason)
    assert executor.executions("shop.lookup") == before + 1
    assert [(a["outcome"], a["reason"]) for a in audit_lines(project, call_id)][-1] == (
        "failed",
        reason,
    )


async def test_a_read_whose_connection_drops_mid_body_is_unknown(
    rt: Runtime, project: Path, executor: FaultExecutor
) -> None:
    """The request was sent and the answer cut off: even a read cannot say it did not run
    (the table of docs/executors.md), and the kernel does not send it again."""
    ctx = await rt.resolve_context("app", "shopper")
    before = executor.executions("shop.lookup")
    executor.mode("drop")
    env = await rt.call(ctx.context_id, "shop.lookup", "r-drop", {"item": "pen"}, as_="app")
    assert env.status.value == "unknown", env.error
    assert env.error is not None
    assert (env.error["code"], env.error["reason"]) == (
        "transient_external",
        "EXECUTOR_CONNECTION_LOST",
    )
    assert executor.executions("shop.lookup") == before + 1
    assert [(a["outcome"], a["reason"]) for a in audit_lines(project, "r-drop")][-1] == (
        "unknown",
        "EXECUTOR_CONNECTION_LOST",
    )


async def test_a_forged_success_is_never_recorded(
    rt: Runtime, executor: FaultExecutor, project: Path
) -> None:
    """An impostor that knows the bearer credential but not the signing key answers
    ``succeeded``: the write is unknown, and the receipt holds none of the forged data."""
    ctx = await rt.resolve_context("app", "shopper")
    executor.mode("bad_signature")
    env = await approved_call(rt, ctx.context_id, "shop.order", "forged", {"item": "ink"})
    assert env.status.value == "unknown"
    assert env.data is None


# ---------------------------------------------------------------------------------------
# readiness at dispatch


async def _open(project: Path) -> Any:
    return charter.open(project, store="memory:", audit_file=project / "audit.jsonl")


@pytest.fixture
def eager(tmp_path: Path, executor: FaultExecutor) -> Path:
    """A project whose readiness is checked at every call (``readiness.ttl_s: 0``)."""
    return write_project(
        tmp_path / "eager",
        executor.url,
        executor.credential,
        executor.signing_key,
        extra_top="readiness: {ttl_s: 0}\n",
    )


@pytest.mark.parametrize("mode", ["order_digest", "order_version"])
async def test_a_write_whose_executor_changed_after_approval_is_refused_before_its_intent(
    eager: Path, executor: FaultExecutor, mode: str
) -> None:
    async with await _open(eager) as rt:
        ctx = await rt.resolve_context("app", "shopper")
        first = await rt.call(ctx.context_id, "shop.order", "rug", {"item": "ink"}, as_="app")
        assert first.approval is not None
        await rt.approve(first.approval["id"], as_="op")
        before = executor.executions("shop.order")
        executor.mode(mode)  # the executor now describes another contract
        env = await rt.call(ctx.context_id, "shop.order", "rug", {"item": "ink"}, as_="app")
        assert env.status.value == "failed"
        assert env.error is not None
        assert (env.error["code"], env.error["reason"]) == (
            "transient_external",
            "EXECUTOR_CONTRACT_CHANGED",
        )
        assert executor.executions("shop.order") == before  # nothing sent
        row = await rt.get_call(ctx.context_id, "rug", as_="app")
        assert row is not None
        assert row.state == "pending_approval"  # no intent recorded; approval kept
        lines = audit_lines(eager, "rug")
        assert (lines[-1]["outcome"], lines[-1]["reason"]) == (
            "failed",
            "EXECUTOR_CONTRACT_CHANGED",
        )
        executor.mode("ok")  # back as the Build says: the approved call runs, once
        ok = await rt.call(ctx.context_id, "shop.order", "rug", {"item": "ink"}, as_="app")
        assert ok.status.value == "succeeded", ok.error
        assert executor.executions("shop.order") == before + 1


async def test_a_read_in_an_earlier_context_is_refused_once_the_digest_changes(
    eager: Path, executor: FaultExecutor
) -> None:
    async with await _open(eager) as rt:
        ctx = await rt.resolve_context("app", "shopper")
        before = executor.executions("shop.lookup")
        executor.mode("digest")
        env = await rt.call(ctx.context_id, "shop.lookup", "rd", {"item": "pen"}, as_="app")
        assert env.status.value == "failed"
        assert env.error is not None
        assert env.error["reason"] == "EXECUTOR_CONTRACT_CHANGED"
        assert env.error["retryable"] is True  # nothing was reserved or sent
        assert executor.executions("shop.lookup") == before
        executor.mode("ok")
        again = await rt.call(ctx.context_id, "shop.lookup", "rd", {"item": "pen"}, as_="app")
        assert again.status.value == "succeeded"
        # a context resolution refused for readiness reaches the audit file too
        executor.mode("order_digest")
        with pytest.raises(TransientExternal):
            await rt.resolve_context("app", "shopper")
    lines = [json.loads(line) for line in (eager / "audit.jsonl").read_text().splitlines()]
    refused = [line for line in lines if line["outcome"] == "not_ready"]
    assert refused
    assert (refused[-1]["tool"], refused[-1]["reason"]) == ("shop.order", "TOOL_NOT_READY")
    assert refused[-1]["details"]["readiness_reason"] == "DIGEST_MISMATCH"


async def test_a_contract_mismatch_answer_drops_the_cached_readiness(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    """Readiness cached for ten minutes: the executor starts serving another contract; the
    first call is refused by the executor (409, nothing ran), the next before its intent."""
    project = write_project(
        tmp_path / "lazy",
        executor.url,
        executor.credential,
        executor.signing_key,
        extra_top="readiness: {ttl_s: 600}\n",
    )
    async with await _open(project) as rt:
        ctx = await rt.resolve_context("app", "shopper")
        before = executor.executions("shop.order")
        executor.mode("v2")
        first = await approved_call(rt, ctx.context_id, "shop.order", "m1", {"item": "ink"})
        assert first.status.value == "failed"
        assert first.error is not None
        assert first.error["reason"] == "CONTRACT_MISMATCH"
        second = await approved_call(rt, ctx.context_id, "shop.order", "m2", {"item": "ink"})
        assert second.status.value == "failed"
        assert second.error is not None
        assert second.error["reason"] == "EXECUTOR_CONTRACT_CHANGED"
        assert executor.executions("shop.order") == before


# ---------------------------------------------------------------------------------------
# approvals across Build changes


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, project: Path) -> Iterator[str]:
    """A store two runtimes share: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{project / 'charter.db'}"
        return
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


async def test_an_approved_write_whose_contract_changed_asks_again_and_runs_once(
    project: Path, executor: FaultExecutor, store_url: str
) -> None:
    store = store_url
    async with charter.open(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "shopper")
        first = await rt.call(ctx.context_id, "shop.order", "chg", {"item": "ink"}, as_="app")
        assert first.approval is not None
        old_id = first.approval["id"]
        await rt.approve(old_id, as_="op")
    before = executor.executions("shop.order")
    # a new Build and executor: one optional parameter added, same version
    executor.mode("v2")
    shutil.copy(HERE / "fault_tools_v2.py", project / "tools.py")
    async with charter.open(project, store=store) as rt:
        new_digest = rt.build.tools["shop.order"].contract.digest
        # the old context is bound to the old Build (issue 18): refused, nothing runs
        stale = await rt.call(ctx.context_id, "shop.order", "chg", {"item": "ink"}, as_="app")
        assert stale.status.value == "denied", stale
        assert stale.error is not None
        assert stale.error["reason"] == "CONTEXT_BUILD_CHANGED"
        assert executor.executions("shop.order") == before  # nothing ran on the old approval
        # the old approval can never be used now: retired as stale, not left in the inbox
        retired = await rt.get_approval(old_id, as_="op")
        assert (retired["status"], retired["reason"]) == ("expired", "APPROVAL_STALE")
        again_stale = await rt.call(ctx.context_id, "shop.order", "chg", {"item": "ink"}, as_="app")
        assert again_stale.error is not None
        assert again_stale.error["reason"] == "CONTEXT_BUILD_CHANGED"
        # a context of the new Build asks again, bound to the new digest, and runs once
        fresh = await rt.resolve_context("app", "shopper", run_id=ctx.run_id)
        again = await rt.call(fresh.context_id, "shop.order", "chg", {"item": "ink"}, as_="app")
        assert again.status.value == "pending_approval", again.error
        assert again.approval is not None
        assert again.approval["id"] != old_id
        approvals = {a.approval_id: a.to_dict() for a in await rt.approvals(as_="op", status=None)}
        assert approvals[again.approval["id"]]["contract_digest"] == new_digest
        assert executor.executions("shop.order") == before
        await rt.approve(again.approval["id"], as_="op")
        done = await rt.call(fresh.context_id, "shop.order", "chg", {"item": "ink"}, as_="app")
        assert done.status.value == "succeeded", done.error
        repeat = await rt.call(fresh.context_id, "shop.order", "chg", {"item": "ink"}, as_="app")
        assert repeat.metrics.cached
        assert executor.executions("shop.order") == before + 1
        row = await rt.get_call(fresh.context_id, "chg", as_="app")
        assert row is not None
        assert row.contract_digest == new_digest
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project, None))
        assert report.ok, report.reason


# ---------------------------------------------------------------------------------------
# late results


async def test_an_answer_after_restart_reconciliation_is_kept_as_a_late_result(
    project: Path, executor: FaultExecutor, store_url: str
) -> None:
    """The dispatching process looks dead to a restarted one (its owner token belongs to an
    earlier incarnation), which reconciles the call to unknown while the executor still holds
    the answer; the answer then arrives: recorded as evidence, the state stays unknown."""
    store = store_url
    audit = project / "audit.jsonl"
    secret = "s3cr3t-" + uuid.uuid4().hex  # a bearer token in the result: redacted as evidence too
    item = {"item": f"ink bearer {secret}"}
    async with (
        charter.open(project, store=store, audit_file=audit) as rt,
        charter.open(project, store=store, reconcile=False) as restarted,
    ):
        ctx = await rt.resolve_context("app", "shopper")
        first = await rt.call(ctx.context_id, "shop.order", "late-1", item, as_="app")
        assert first.approval is not None
        await rt.approve(first.approval["id"], as_="op")
        rt.kernel.state.owner = {**rt.kernel.state.owner, "start": "an-earlier-incarnation"}
        before = executor.executions("shop.order")
        executor.mode("late")
        async with anyio.create_task_group() as tg:
            answers: list[Any] = []

            async def submit() -> None:
                answers.append(
                    await rt.call(ctx.context_id, "shop.order", "late-1", item, as_="app")
                )

            tg.start_soon(submit)
            with anyio.fail_after(10):
                while await anyio.to_thread.run_sync(executor.held) == 0:
                    await anyio.sleep(0.02)
            reconciled = await restarted.kernel.reconcile()
            assert [r.call_id for r in reconciled] == ["late-1"]
            executor.release()
        (env,) = answers
        assert env.status.value == "unknown"
        assert env.error is not None
        assert env.error["reason"] == "DISPATCH_INTERRUPTED"
        assert any(w.startswith("LATE_RESULT") for w in env.warnings)
        assert executor.executions("shop.order") == before + 1
        row = await rt.get_call(ctx.context_id, "late-1", as_="op")
        assert row is not None
        assert row.state == "unknown"
        late = row.to_dict()["late_result"]
        assert late["receipt"]["status"] == "succeeded"
        assert late["receipt"]["data"]["ordered"] == "ink bearer [REDACTED]"
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project, None))
        assert report.ok, report.reason
    lines = audit_lines(project, "late-1")
    assert lines[-1]["outcome"] == "late_result"
    shown = await anyio.to_thread.run_sync(
        CliRunner().invoke,
        app,
        [
            "calls",
            "show",
            "late-1",
            "--context",
            ctx.context_id,
            "--as",
            "op",
            "--project",
            str(project),
            "--store",
            store,
        ],
        None,
        {"COLUMNS": "200"},
    )
    assert shown.exit_code == 0, shown.output
    assert "late result" in shown.stdout
    assert '"ordered": "ink bearer [REDACTED]"' in shown.stdout
    assert secret not in shown.stdout
    assert secret not in audit.read_text()


async def test_an_unverified_answer_drops_the_cached_readiness(
    tmp_path: Path, executor: FaultExecutor
) -> None:
    """Readiness cached for ten minutes; an answer fails its signature check: the next call
    re-describes the executor first (and is refused when it now serves another contract)."""
    project = write_project(
        tmp_path / "lazy2",
        executor.url,
        executor.credential,
        executor.signing_key,
        extra_top="readiness: {ttl_s: 600}\n",
    )
    async with await _open(project) as rt:
        ctx = await rt.resolve_context("app", "shopper")
        executor.mode("bad_signature")
        first = await approved_call(rt, ctx.context_id, "shop.order", "u1", {"item": "ink"})
        assert first.status.value == "unknown"
        before = executor.executions("shop.order")
        executor.mode("order_digest")
        second = await approved_call(rt, ctx.context_id, "shop.order", "u2", {"item": "ink"})
        assert second.status.value == "failed"
        assert second.error is not None
        assert second.error["reason"] == "EXECUTOR_CONTRACT_CHANGED"
        assert executor.executions("shop.order") == before
