"""The store conformance suite: every backend must pass exactly these tests.

A plain class: its ``test_*`` methods are coroutines that take their inputs as arguments
(``store``: a fresh, empty store; ``key``: the ledger key it was opened with;
``store_factory``: a :class:`StoreFactory` for the tests that open their own). Nothing here
imports pytest; a runner supplies the arguments. With pytest and anyio's plugin (Charter's
``test`` extra), as ``tests/conformance.py`` does::

    class StoreSuite(StoreConformance):
        pytestmark = pytest.mark.anyio

        @pytest.fixture
        def key(self) -> LedgerKey:
            return fixed_ledger_key("conformance")

        @pytest.fixture
        async def store(self, store_factory, key):
            async with open_store(store_factory, key) as store:
                yield store

    class TestMyStore(StoreSuite):
        @pytest.fixture
        def store_factory(self) -> StoreFactory:
            return factory_from(my_store_context)

``store_factory`` returns an async context manager yielding a fresh, empty store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any, Protocol

import anyio

from charter.contracts.canonical import canonical_bytes
from charter.errors import InvalidInput, LedgerIntegrityError, StoreConflict
from charter.ledger.chain import LedgerKey, chain_hash
from charter.ledger.clock import Clock
from charter.ledger.events import GENESIS_HASH, NewEvent, decode
from charter.ledger.lifecycle import NOTHING_IN_FLIGHT, InFlightCalls
from charter.ledger.ports import Store
from charter.ledger.projections import artifact_key, manifest, run_key, task_key
from charter.ledger.subscribe import read_events, subscribe
from charter.ledger.verify import verify_run
from charter.stores.builds import BuildStore
from charter.stores.leases import Lease, LeaseStore
from charter.testing.clock import FakeClock
from charter.testing.raises import raises
from charter.testing.scenarios import (
    SAMPLE_RUN,
    artifact,
    ev,
    failure,
    record_sample_run,
    run_created,
)
from charter.testing.typed_reads import TypedReadConformance


class StoreFactory(Protocol):
    def __call__(
        self, *, key: LedgerKey, clock: Clock, in_flight: InFlightCalls
    ) -> AbstractAsyncContextManager[Store]: ...


class _Busy:
    def __init__(self) -> None:
        self.calls: dict[tuple[str, str | None], list[str]] = {}

    async def in_flight(self, *, run_id: str, task_id: str | None) -> Sequence[str]:
        return self.calls.get((run_id, task_id), [])


async def _started(store: Store, run_id: str, *, tasks: Sequence[str] = ()) -> None:
    entries = [run_created(), ev("run_status_changed", status="planning")]
    entries += [ev("task_created", task_id=t) for t in tasks]
    entries.append(ev("run_status_changed", status="running"))
    await store.append(run_id, entries)


class StoreConformance(TypedReadConformance):
    """Behaviour every :class:`~charter.ledger.ports.Store` must have (typed reads included:
    :mod:`charter.testing.typed_reads`)."""

    # -- appending and reading ------------------------------------------------------------

    async def test_create_and_read_back(self, store: Store, key: LedgerKey) -> None:
        [event] = await store.append("run-a", [run_created()])
        assert (event.seq, event.event_id, event.prev_hash) == (1, "00000001", GENESIS_HASH)
        assert event.at == "2025-01-01T00:00:00.000000Z"
        head = await store.head("run-a")
        assert head is not None
        assert (head.seq, head.hash) == (1, event.hash)
        assert key.mac_matches("run-a", 1, event.hash, head.mac)
        [row] = await store.read_stored("run-a")
        assert chain_hash(row.prev_hash, row.data) == row.hash == event.hash
        assert decode(row) == event
        assert await store.head("missing") is None
        assert await store.read_stored("missing") == []

    async def test_sample_run_verifies_and_projects(self, store: Store, key: LedgerKey) -> None:
        await record_sample_run(store, "run-s")
        report = await verify_run(store, "run-s", key)
        assert report.ok, report
        assert report.events == len(SAMPLE_RUN)
        run = await store.get_row(run_key("run-s"))
        assert run is not None
        assert run["status"] == "completed"
        tasks = await store.list_rows("tasks", "run-s")
        assert [t["task_id"] for t in tasks] == ["retrieve", "report"]
        report_task = tasks[1]
        assert report_task["attempts"] == 2
        assert report_task["error"] is None
        assert [h["attempt"] for h in report_task["handoffs"]] == [1, 2]
        [art] = await store.list_rows("artifacts", "run-s")
        assert art["artifact_id"] == "actives-1"
        assert art["producer"]["task_id"] == "retrieve"
        snap = await store.snapshot("run-s")
        assert snap is not None
        doc = manifest(
            snap.run or {}, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq
        )
        assert doc["event_count"] == len(SAMPLE_RUN)
        assert doc["last_event_id"] == f"{len(SAMPLE_RUN):08d}"
        assert len(doc["handoffs"]) == 3

    async def test_stored_snapshot_is_the_snapshot_unparsed(self, store: Store) -> None:
        assert await store.stored_snapshot("run-s") is None
        await record_sample_run(store, "run-s")
        await _started(store, "run-other", tasks=["t9"])
        stored = await store.stored_snapshot("run-s")
        snap = await store.snapshot("run-s")
        assert stored is not None
        assert snap is not None
        assert stored.head == snap.head
        assert stored.run is not None
        assert json.loads(stored.run) == snap.run
        assert stored.run == canonical_bytes(snap.run)  # the row's canonical text, as written
        assert set(stored.tables) == set(snap.tables)
        for table, rows in snap.tables.items():
            assert [json.loads(r) for r in stored.tables[table]] == rows, table
            assert stored.tables[table] == [canonical_bytes(r) for r in rows], table
        assert [t["task_id"] for t in snap.tables["tasks"]] == ["retrieve", "report"]

    async def test_batch_is_atomic(self, store: Store) -> None:
        await _started(store, "run-b", tasks=["t1"])
        head = await store.head("run-b")
        with raises(InvalidInput) as info:
            await store.append(
                "run-b",
                [
                    ev("task_status_changed", task_id="t1", status="running"),
                    ev("task_status_changed", task_id="t1", status="pending"),
                ],
            )
        assert info.value.reason == "ILLEGAL_TRANSITION"
        assert await store.head("run-b") == head
        task = await store.get_row(task_key("run-b", "t1"))
        assert task is not None
        assert task["status"] == "pending"

    async def test_read_after_and_limit(self, store: Store) -> None:
        await record_sample_run(store, "run-r")
        rows = await store.read_stored("run-r", after=3, limit=4)
        assert [r.seq for r in rows] == [4, 5, 6, 7]
        n = len(SAMPLE_RUN)
        events = await read_events(store, "run-r", after=n - 3)
        assert [e.seq for e in events] == [n - 2, n - 1, n]

    # -- conflicts ------------------------------------------------------------------------

    async def test_unknown_run_is_refused(self, store: Store) -> None:
        with raises(InvalidInput) as info:
            await store.append("nope", [ev("task_progress", message="x")])
        assert info.value.reason == "RUN_NOT_FOUND"

    async def test_duplicate_run_conflicts(self, store: Store) -> None:
        await store.append("run-d", [run_created()])
        with raises(StoreConflict) as info:
            await store.append("run-d", [run_created()])
        assert info.value.reason == "RUN_EXISTS"

    async def test_duplicate_seq_conflicts(self, store: Store) -> None:
        await store.append("run-q", [run_created()], expected_seq=1)
        await store.append("run-q", [ev("task_progress", message="x")], expected_seq=2)
        for stale in (1, 2, 4):
            with raises(StoreConflict) as info:
                await store.append("run-q", [ev("task_progress", message="y")], expected_seq=stale)
            assert info.value.reason == "LEDGER_SEQ_CONFLICT"
        head = await store.head("run-q")
        assert head is not None
        assert head.seq == 2

    async def test_racing_writers_on_one_seq(self, store: Store) -> None:
        await store.append("run-x", [run_created()])
        outcomes: list[str] = []

        async def attempt(i: int) -> None:
            try:
                await store.append("run-x", [ev("task_progress", writer=i)], expected_seq=2)
                outcomes.append("ok")
            except StoreConflict:
                outcomes.append("conflict")

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(attempt, i)
        assert sorted(outcomes) == ["conflict"] * 7 + ["ok"]

    async def test_unknown_event_type_is_refused(self, store: Store) -> None:
        await store.append("run-u", [run_created()])
        with raises(InvalidInput) as info:
            await store.append("run-u", [NewEvent(type="made_up")])
        assert info.value.reason == "UNKNOWN_EVENT_TYPE"

    async def test_bad_identifier_is_refused(self, store: Store) -> None:
        with raises(InvalidInput) as info:
            await store.append("../etc", [run_created()])
        assert info.value.reason == "INVALID_IDENTIFIER"

    # -- lifecycles -----------------------------------------------------------------------

    async def test_failed_needs_a_structured_error(self, store: Store) -> None:
        await _started(store, "run-f", tasks=["t1"])
        await store.append("run-f", [ev("task_status_changed", task_id="t1", status="running")])
        cases: list[tuple[dict[str, Any], str]] = [
            ({"status": "failed"}, "FAILED_REQUIRES_ERROR"),
            ({"status": "failed", "error": {"code": "x"}}, "ERROR_MALFORMED"),
            ({"status": "completed", "error": failure()}, "ERROR_ONLY_ON_FAILED"),
        ]
        for payload, reason in cases:
            with raises(InvalidInput) as info:
                await store.append("run-f", [ev("task_status_changed", task_id="t1", **payload)])
            assert info.value.reason == reason
        await store.append(
            "run-f", [ev("task_status_changed", task_id="t1", status="failed", error=failure())]
        )
        task = await store.get_row(task_key("run-f", "t1"))
        assert task is not None
        assert task["error"] == failure()

    async def test_terminal_run_accepts_no_change(self, store: Store, key: LedgerKey) -> None:
        await _started(store, "run-t")
        await store.append("run-t", [ev("run_status_changed", status="cancelled")])
        for entry in (
            ev("run_status_changed", status="running"),
            ev("task_created", task_id="late"),
            ev("artifact_registered", **artifact("a-1", "x.csv")),
        ):
            with raises(InvalidInput) as info:
                await store.append("run-t", [entry])
            assert info.value.reason == "RUN_TERMINAL"
        await store.append("run-t", [ev("task_progress", message="late note")])
        assert (await verify_run(store, "run-t", key)).ok

    async def test_run_transitions_follow_the_table(self, store: Store) -> None:
        await store.append("run-l", [run_created()])
        with raises(InvalidInput) as info:
            await store.append("run-l", [ev("run_status_changed", status="completed")])
        assert info.value.reason == "ILLEGAL_TRANSITION"
        with raises(InvalidInput) as info:
            await store.append("run-l", [ev("run_status_changed", status="exploded")])
        assert info.value.reason == "UNKNOWN_STATUS"

    async def test_task_retry_counts_attempts(self, store: Store) -> None:
        await _started(store, "run-k", tasks=["t1"])
        steps = ["running", "input_required", "running", ("failed", failure()), "running"]
        for step in steps:
            status, error = step if isinstance(step, tuple) else (step, None)
            payload: dict[str, Any] = {"task_id": "t1", "status": status}
            if error:
                payload["error"] = error
            await store.append("run-k", [ev("task_status_changed", **payload)])
        task = await store.get_row(task_key("run-k", "t1"))
        assert task is not None
        assert (task["status"], task["attempts"], task["error"]) == ("running", 3, None)
        await store.append("run-k", [ev("task_status_changed", task_id="t1", status="completed")])
        with raises(InvalidInput) as info:
            await store.append("run-k", [ev("task_status_changed", task_id="t1", status="running")])
        assert info.value.reason == "ILLEGAL_TRANSITION"

    async def test_in_flight_calls_block_status_changes(
        self, store_factory: StoreFactory, key: LedgerKey
    ) -> None:
        busy = _Busy()
        async with store_factory(key=key, clock=FakeClock(), in_flight=busy) as store:
            await _started(store, "run-i", tasks=["t1"])
            busy.calls[("run-i", "t1")] = ["call-9"]
            busy.calls[("run-i", None)] = ["call-9"]
            for entry in (
                ev("task_status_changed", task_id="t1", status="running"),
                ev("run_status_changed", status="completed"),
            ):
                with raises(InvalidInput) as info:
                    await store.append("run-i", [entry])
                assert info.value.reason == "CALL_IN_FLIGHT"
            await store.append("run-i", [ev("task_progress", task_id="t1", message="working")])
            busy.calls.clear()
            await store.append("run-i", [ev("run_status_changed", status="completed")])

    # -- projections ----------------------------------------------------------------------

    async def test_observational_events_leave_snapshots_alone(self, store: Store) -> None:
        await _started(store, "run-o", tasks=["t1"])
        before_run = await store.get_row(run_key("run-o"))
        before_task = await store.get_row(task_key("run-o", "t1"))
        await store.append(
            "run-o",
            [
                ev("task_progress", task_id="t1", message="half way"),
                ev("tool_call_recorded", call_id="c1", status="succeeded"),
            ],
        )
        assert await store.get_row(run_key("run-o")) == before_run
        assert await store.get_row(task_key("run-o", "t1")) == before_task

    async def test_artifacts_are_immutable(self, store: Store) -> None:
        await _started(store, "run-art")
        await store.append("run-art", [ev("artifact_registered", **artifact("a-1", "one.csv"))])
        with raises(InvalidInput) as info:
            await store.append("run-art", [ev("artifact_registered", **artifact("a-1", "b.csv"))])
        assert info.value.reason == "ARTIFACT_EXISTS"
        await store.append("run-art", [ev("artifact_registered", **artifact("a-2", "two.csv"))])
        rows = await store.list_rows("artifacts", "run-art")
        assert [(r["artifact_id"], r["path"]) for r in rows] == [
            ("a-1", "one.csv"),
            ("a-2", "two.csv"),
        ]
        assert await store.get_row(artifact_key("run-art", "a-1")) == rows[0]

    async def test_list_runs_newest_first(self, store: Store) -> None:
        for run_id in ("run-1", "run-2", "run-3"):
            await store.append(run_id, [run_created()])
        await store.append("run-2", [ev("run_status_changed", status="planning")])
        summaries = await store.list_runs(limit=2)
        assert [s.run["run_id"] for s in summaries] == ["run-3", "run-2"]
        assert [s.event_count for s in summaries] == [1, 2]

    async def test_the_schema_is_current_once_open(self, store: Store) -> None:
        recorded, known = await store.schema_versions()
        assert recorded == known >= 1

    async def test_list_runs_of_one_tenant(self, store: Store) -> None:
        for run_id, tenant in (("run-a1", "acme"), ("run-g1", "globex"), ("run-a2", "acme")):
            created = run_created()
            await store.append(run_id, [ev("run_created", **created.payload, tenant=tenant)])
        await store.append("run-none", [run_created()])  # a run without a tenant
        acme = await store.list_runs(limit=10, tenant="acme")
        assert [s.run["run_id"] for s in acme] == ["run-a2", "run-a1"]
        assert [s.run["run_id"] for s in await store.list_runs(limit=1, tenant="acme")] == [
            "run-a2"
        ]
        assert [s.run["run_id"] for s in await store.list_runs(tenant="globex")] == ["run-g1"]
        assert await store.list_runs(tenant="initech") == []
        assert len(await store.list_runs(limit=10)) == 4

    # -- concurrency and subscriptions ----------------------------------------------------

    async def test_many_concurrent_writers(self, store: Store, key: LedgerKey) -> None:
        for r in range(4):
            await store.append(f"run-c{r}", [run_created()])

        async def writer(i: int) -> None:
            for j in range(10):
                await store.append(f"run-c{i % 4}", [ev("task_progress", writer=i, n=j)])

        async with anyio.create_task_group() as tg:
            for i in range(32):
                tg.start_soon(writer, i)
        for r in range(4):
            report = await verify_run(store, f"run-c{r}", key)
            assert report.ok, report
            assert report.head_seq == 1 + 8 * 10

    async def test_subscription_sees_new_events(self, store: Store) -> None:
        await store.append("run-w", [run_created()])
        seen: list[int] = []

        async def follow() -> None:
            async for event in subscribe(store, "run-w", after=0, poll_s=0.05):
                seen.append(event.seq)
                if event.seq == 3:
                    return

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await anyio.sleep(0.01)
                await store.append("run-w", [ev("task_progress", n=1)])
                await store.append("run-w", [ev("task_progress", n=2)])
        assert seen == [1, 2, 3]

    async def test_subscription_from_a_known_hash(self, store: Store) -> None:
        events = await store.append("run-h", [run_created(), ev("task_progress", n=1)])
        later = await store.append("run-h", [ev("task_progress", n=2)])
        got = await read_events(store, "run-h", after=2, after_hash=events[1].hash)
        assert got == list(later)
        with raises(LedgerIntegrityError) as info:
            await read_events(store, "run-h", after=2, after_hash=GENESIS_HASH)
        assert info.value.reason == "LEDGER_HASH_MISMATCH"

    # -- owner leases -----------------------------------------------------------------------

    async def test_leases_are_renewed_read_and_released(self, store: Store) -> None:
        assert isinstance(store, LeaseStore)
        first = Lease(
            owner_id="own-a",
            host="h1",
            pid=42,
            start="100",
            renewed_at="2025-01-01T00:00:00.000000Z",
            expires_at="2025-01-01T00:00:30.000000Z",
        )
        other = replace(first, owner_id="own-b", pid=43)
        await store.renew_lease(first)
        await store.renew_lease(other)
        assert await store.read_leases(["own-a", "own-b", "own-c"]) == {
            "own-a": first,
            "own-b": other,
        }
        renewed = replace(first, renewed_at=first.expires_at, expires_at="2025-01-01T00:01:00Z")
        await store.renew_lease(renewed)
        assert await store.read_leases(["own-a"]) == {"own-a": renewed}
        await store.release_lease("own-a")
        await store.release_lease("own-a")  # releasing twice is harmless
        assert await store.read_leases(["own-a", "own-b"]) == {"own-b": other}
        assert await store.read_leases([]) == {}

    # -- the Build record -------------------------------------------------------------------

    async def test_the_build_activated_last_is_current(self, store: Store) -> None:
        assert isinstance(store, BuildStore)
        assert await store.current_build() is None
        b1 = await store.activate_build("sha256:b1", "2025-01-01T00:00:00.000000Z")
        assert (b1.digest, b1.activation) == ("sha256:b1", 1)
        again = await store.activate_build("sha256:b1", "2025-01-01T00:00:05.000000Z")
        assert again == b1  # already current: nothing changes
        b2 = await store.activate_build("sha256:b2", "2025-01-01T00:01:00.000000Z")
        assert (b2.digest, b2.activation) == ("sha256:b2", 2)
        assert await store.current_build() == b2
        back = await store.activate_build("sha256:b1", "2025-01-01T00:02:00.000000Z")  # rollback
        assert (back.digest, back.activation) == ("sha256:b1", 3)
        assert back.first_seen_at == b1.first_seen_at
        assert back.activated_at == "2025-01-01T00:02:00.000000Z"
        assert await store.current_build() == back


def open_store(factory: StoreFactory, key: LedgerKey) -> AbstractAsyncContextManager[Store]:
    """The suite's ``store``: a fresh store on a fake clock with nothing in flight."""
    return factory(key=key, clock=FakeClock(), in_flight=NOTHING_IN_FLIGHT)


def factory_from(
    opener: Callable[..., AbstractAsyncContextManager[Store]], **fixed: Any
) -> StoreFactory:
    """Build a :class:`StoreFactory` from an opener taking ``key``, ``clock``, ``in_flight``."""

    def factory(*, key: LedgerKey, clock: Clock, in_flight: InFlightCalls) -> Any:
        return opener(key=key, clock=clock, in_flight=in_flight, **fixed)

    return factory


__all__ = ["StoreConformance", "StoreFactory", "factory_from", "open_store"]
