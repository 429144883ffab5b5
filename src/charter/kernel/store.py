"""What the kernel needs from a store: the ledger's ports plus one indexed query."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from charter.ledger.ports import Store
from charter.ledger.projections import Row


class KernelStore(Store, Protocol):
    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        """Rows of ``table`` whose key or indexed columns equal ``where``, in table order."""
        ...

    def run_lock(self, run_id: str) -> AbstractAsyncContextManager[None]:
        """Held while a write tool of the run is dispatched; exclusive across processes."""
        ...
