"""The memory store passes the conformance suite and keeps the primary-key invariant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from charter.errors import StoreConflict
from charter.ledger.chain import LedgerKey
from charter.ledger.clock import Clock
from charter.ledger.lifecycle import InFlightCalls
from charter.stores.memory import MemoryStore
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created
from charter.testing.store_conformance import StoreFactory
from tests.conformance import StoreSuite


@asynccontextmanager
async def _memory(
    *, key: LedgerKey, clock: Clock, in_flight: InFlightCalls
) -> AsyncIterator[MemoryStore]:
    store = MemoryStore(key=key, clock=clock, in_flight=in_flight)
    try:
        yield store
    finally:
        await store.aclose()


class TestMemoryStore(StoreSuite):
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        return _memory


@pytest.mark.anyio
async def test_duplicate_key_raises_like_a_primary_key() -> None:
    store = MemoryStore(key=fixed_ledger_key())
    await store.append("run-m", [run_created()])
    # Simulate a head that fell behind the rows (as a broken writer might leave it).
    stale = store.heads["run-m"]
    await store.append("run-m", [ev("task_progress", n=1)])
    store.heads["run-m"] = stale
    with pytest.raises(StoreConflict) as info:
        await store.append("run-m", [ev("task_progress", n=2)])
    assert info.value.reason == "LEDGER_DUPLICATE_KEY"
