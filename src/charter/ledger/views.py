"""Typed views of projection rows: what the read ports hand to the kernel and the edges.

A projection row is stored as canonical JSON and read back as a dict; the stores, the
ledger's handlers and verification work on that form (:data:`charter.ledger.projections.Row`).
Everything above them reads a view instead: a frozen record per table with the columns as
typed attributes, built once by ``from_row``::

    call = await store.call_row(run_id, context_id, call_id)
    if call is not None and call.state == "unknown": ...

A view keeps the row it was built from (``to_dict()`` returns a copy), because some tables
carry more than their fixed columns (a context row keeps its resolution payload, a proposal
row its draft) and the HTTP API answers with the whole row. The view itself is never
written back: writes go through events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, Self, TypeVar

from charter.ledger.projections import Row, RowKey

__all__ = [
    "ApprovalRow",
    "ArtifactRow",
    "CallRow",
    "ContextRow",
    "ProposalRow",
    "RunRow",
    "TaskRow",
    "TypedReads",
    "View",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """Base of the row views: typed columns plus the row they were read from."""

    TABLE: ClassVar[str] = ""
    _NAMES: ClassVar[tuple[str, ...]] = ()

    row: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """The view of one stored row (missing optional columns read as their default)."""
        names = cls._NAMES or _names(cls)
        values = {name: row[name] for name in names if name in row}
        return cls(row=row, **values)

    def to_dict(self) -> dict[str, Any]:
        """The whole row as the store holds it (the HTTP API's form)."""
        return dict(self.row)


def _names(cls: type[View]) -> tuple[str, ...]:
    names = tuple(f.name for f in fields(cls) if f.name != "row")
    cls._NAMES = names
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow(View):
    TABLE: ClassVar[str] = "runs"

    run_id: str
    session_id: str | None = None
    workflow_slug: str | None = None
    workflow: Any = None
    tenant: str | None = None
    status: str = ""
    error: Any = None
    created_at: str = ""
    updated_at: str = ""
    snapshot_seq: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRow(View):
    TABLE: ClassVar[str] = "tasks"

    run_id: str
    task_id: str
    seq: int = 0
    status: str = ""
    attempts: int = 0
    role: str | None = None
    profile: str | None = None
    title: str | None = None
    depends_on: list[str] = field(default_factory=list)
    error: Any = None
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRow(View):
    TABLE: ClassVar[str] = "artifacts"

    run_id: str
    artifact_id: str
    seq: int = 0
    path: str = ""
    sha256: str = ""
    type: str | None = None
    media_type: str = ""
    size: int = 0
    producer: dict[str, Any] = field(default_factory=dict)
    trust: str = ""
    created_at: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow(View):
    TABLE: ClassVar[str] = "contexts"

    run_id: str
    context_id: str
    tenant: str
    principal: str
    expires_at: str
    created_at: str = ""
    profile: str | None = None
    agent: str | None = None
    calls_by_tool: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRow(View):
    TABLE: ClassVar[str] = "calls"

    run_id: str
    context_id: str
    call_id: str
    tool_id: str
    tenant: str
    state: str
    tool_version: str | None = None
    contract_digest: str | None = None
    fingerprint: str = ""
    actor: str | None = None
    approval_id: str | None = None
    task_id: str | None = None
    summary: Any = None
    attempts: int = 0
    receipt: dict[str, Any] | None = None
    owner: dict[str, Any] | None = None
    idempotency_key: str | None = None
    resolution: dict[str, Any] | None = None
    reserved_seq: int = 0
    updated_seq: int = 0
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRow(View):
    TABLE: ClassVar[str] = "approvals"

    run_id: str
    approval_id: str
    status: str
    context_id: str
    call_id: str
    tool_id: str
    tenant: str
    expires_at: str
    tool_version: str | None = None
    contract_digest: str = ""
    fingerprint: str = ""
    requested_by: str | None = None
    summary: Any = None
    effect: str | None = None
    danger: str | None = None
    requested_at: str = ""
    decided_by: str | None = None
    decided_at: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalRow(View):
    TABLE: ClassVar[str] = "proposals"

    run_id: str
    proposal_id: str
    tenant: str
    kind: str
    status: str
    target: Any = None
    baseline_version: Any = None
    payload: Any = None
    diagnostics: Any = None
    diff: Any = None
    requested_by: str | None = None
    tool_id: str | None = None
    call_id: str | None = None
    conversation_id: str | None = None
    expires_at: str = ""
    created_at: str = ""
    updated_at: str = ""
    rationale: str = ""
    warnings: list[str] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    apply: dict[str, Any] | None = None
    applied: dict[str, Any] | None = None


V = TypeVar("V", bound=View)


class _RowSource(Protocol):
    async def get_row(self, key: RowKey) -> Row | None: ...

    async def list_rows(self, table: str, run_id: str) -> Sequence[Row]: ...

    async def query_rows(
        self, table: str, where: Mapping[str, Any], *, limit: int = 100
    ) -> Sequence[Row]: ...


class TypedReads:
    """The typed read port, mixed into every store (memory, SQLite, PostgreSQL) over its own
    ``get_row`` / ``query_rows``; held to one behaviour by the store conformance suite.

    ``read_view(CallRow, run_id, context_id, call_id)`` reads one row by its key columns;
    ``find_views(CallRow, state="unknown", tenant=t)`` the rows whose key or indexed columns
    equal the given values, in table order (an unindexed column is refused);
    ``list_views(CallRow, run_id)`` all of one run's rows of the table.
    """

    __slots__ = ()

    async def read_view(self: _RowSource, view: type[V], *key: str) -> V | None:
        row = await self.get_row(RowKey(view.TABLE, key))
        return None if row is None else view.from_row(row)

    async def list_views(self: _RowSource, view: type[V], run_id: str) -> list[V]:
        """Every row of ``view``'s table that belongs to ``run_id``, in table order."""
        return [view.from_row(row) for row in await self.list_rows(view.TABLE, run_id)]

    async def find_views(
        self: _RowSource, view: type[V], *, limit: int = 100, **where: Any
    ) -> list[V]:
        rows = await self.query_rows(view.TABLE, where, limit=limit)
        return [view.from_row(row) for row in rows]
