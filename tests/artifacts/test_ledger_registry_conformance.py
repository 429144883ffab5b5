"""The ledger-backed registry (what the runtime wires: the ``artifacts`` projection rows)
passes the registry suite on the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from charter.artifacts.ledger_registry import LedgerRegistry
from charter.artifacts.ports import ArtifactRegistry
from charter.ledger.ports import Store
from charter.stores.memory import MemoryStore
from charter.stores.postgres import PostgresStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.artifact_conformance import REGISTRY_RUNS
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import run_created
from tests.conformance import RegistrySuite
from tests.stores.conftest import create_database, drop_database


async def _registry(store: Store) -> LedgerRegistry:
    for run_id in REGISTRY_RUNS:
        await store.append(run_id, [run_created()])
    return LedgerRegistry(store)


class TestLedgerRegistryOnMemory(RegistrySuite):
    @pytest.fixture
    async def registry(self) -> AsyncIterator[ArtifactRegistry]:
        store = MemoryStore(key=fixed_ledger_key())
        try:
            yield await _registry(store)
        finally:
            await store.aclose()


class TestLedgerRegistryOnSQLite(RegistrySuite):
    @pytest.fixture
    async def registry(self, tmp_path: Path) -> AsyncIterator[ArtifactRegistry]:
        async with SQLiteStore.open(tmp_path / "registry.db", key=fixed_ledger_key()) as store:
            yield await _registry(store)


@pytest.fixture(scope="module")
def registry_db() -> Iterator[str]:
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


@pytest.mark.postgres
class TestLedgerRegistryOnPostgres(RegistrySuite):
    @pytest.fixture
    async def registry(self, registry_db: str) -> AsyncIterator[ArtifactRegistry]:
        with psycopg.connect(registry_db, autocommit=True) as conn:  # a fresh, empty schema
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
        async with PostgresStore.open(registry_db, key=fixed_ledger_key()) as store:
            yield await _registry(store)
