"""What the kernel needs from a store: the ledger's ports, one indexed query and the typed
read port (rows as :mod:`charter.ledger.views`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from charter.ledger.ports import Store
from charter.ledger.projections import Row
from charter.ledger.views import V, View


class KernelStore(Store, Protocol):
    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]:
        """Rows of ``table`` whose key or indexed columns equal ``where``, in table order."""
        ...

    async def read_view(self, view: View[V], *key: str) -> V | None:
        """One row of ``view``'s table by its key columns, as the typed view (or None)."""
        ...

    async def list_views(self, view: View[V], run_id: str) -> list[V]:
        """Every row of ``view``'s table in the run, each as the typed view."""
        ...

    async def find_views(self, view: View[V], *, limit: int = 100, **where: Any) -> list[V]:
        """:meth:`query_rows` of ``view``'s table, each row as the typed view."""
        ...

    def run_lock(self, run_id: str) -> AbstractAsyncContextManager[None]:
        """Held while a write tool of the run is dispatched; exclusive across processes."""
        ...
