"""The pytest runner of the conformance suites in :mod:`charter.testing`.

The suites are plain classes whose ``test_*`` methods take their inputs as arguments; these
bases add what pytest needs — the fixtures that build those inputs, anyio for the coroutines,
and one run per row of a suite's ``PARAMETERS``. A backend's test class subclasses one of them
and gives the one fixture its backend is known by (``store_factory``, ``backend``,
``registry``, ``opener``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import pytest

from charter.artifacts.ports import ArtifactStore
from charter.ledger.chain import LedgerKey
from charter.ledger.ports import Store
from charter.testing.artifact_conformance import (
    ArtifactStoreConformance,
    Backend,
    RegistryConformance,
)
from charter.testing.conversation_conformance import ConversationConformance
from charter.testing.ids import fixed_ledger_key
from charter.testing.store_conformance import StoreConformance, StoreFactory, open_store


class _Runner:
    pytestmark = pytest.mark.anyio
    PARAMETERS: ClassVar[Mapping[str, Any]] = {}

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        rows = self.PARAMETERS.get(metafunc.function.__name__)
        if rows is not None:
            names, values = rows
            metafunc.parametrize(names, values)


class StoreSuite(_Runner, StoreConformance):
    """Give ``store_factory``."""

    @pytest.fixture
    def key(self) -> LedgerKey:
        return fixed_ledger_key("conformance")

    @pytest.fixture
    async def store(self, store_factory: StoreFactory, key: LedgerKey) -> AsyncIterator[Store]:
        async with open_store(store_factory, key) as s:
            yield s


class ArtifactStoreSuite(_Runner, ArtifactStoreConformance):
    """Give ``backend``."""

    PARAMETERS = ArtifactStoreConformance.PARAMETERS

    @pytest.fixture
    def store(self, backend: Backend) -> ArtifactStore:
        return backend.make()


class RegistrySuite(_Runner, RegistryConformance):
    """Give ``registry``."""


class ConversationSuite(_Runner, ConversationConformance):
    """Give ``opener``."""
