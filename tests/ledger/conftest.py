from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel._project import write_runtime_project
from tests.ledger._backends import Backend, postgres_backend, sqlite_backend
from tests.stores.conftest import create_database, drop_database, pg_url

__all__ = ["pg_url"]  # a fresh PostgreSQL database per test


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The store, on SQLite and on a fresh PostgreSQL database, with the attacker's access."""
    if request.param == "sqlite":
        yield sqlite_backend(tmp_path / "store.db")
        return
    name = create_database()
    try:
        yield postgres_backend(f"postgresql://postgres@127.0.0.1:5432/{name}")
    finally:
        drop_database(name)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The key-value project the ledger tests call into (tests/kernel/_project.py)."""
    return write_runtime_project(tmp_path / "kv")
