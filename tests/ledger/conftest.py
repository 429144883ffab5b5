import pytest

from tests.stores.conftest import pg_url  # a fresh PostgreSQL database per test

__all__ = ["pg_url"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
