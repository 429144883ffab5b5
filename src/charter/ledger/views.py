"""Typed views of projection rows: what the read ports hand to the kernel and the edges.

A projection row is stored as canonical JSON and read back as a dict; the stores, the
ledger's handlers and verification work on that form (:data:`charter.ledger.projections.Row`).
Everything above them reads a view instead: an immutable record per table with the columns
as typed attributes, built by ``from_row``. Views are named tuples, built in C: a call row's
view took about a tenth of the time a frozen dataclass of the same columns did (7.6 against
76 us on a loaded two-core machine), which matters where a run's calls are all read::

    call = await store.read_view(CallRow, run_id, context_id, call_id)
    if call is not None and call.state == "unknown": ...

A view keeps the row it was built from (``to_dict()`` returns a copy), because some tables
carry more than their fixed columns (a context row keeps its resolution payload, a proposal
row its draft) and the HTTP API answers with the whole row. The view itself is never
written back: writes go through events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, TypeVar

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
    "table_of",
]


_EMPTY: Mapping[str, Any] = MappingProxyType({})


V = TypeVar("V")
V_co = TypeVar("V_co", covariant=True)


class View(Protocol[V_co]):
    """A row view class, as the read port takes it: its table and ``from_row``
    (``CallRow``, ``ApprovalRow``, …: each is a :class:`~typing.NamedTuple` whose last field
    is the row itself, with ``to_dict()`` giving a copy of it)."""

    def from_row(self, row: Mapping[str, Any]) -> V_co: ...


def table_of(view: View[Any]) -> str:
    """The projection table a view class reads."""
    return _TABLES[view]


def _view(cls: Any, row: Mapping[str, Any]) -> Any:
    """``cls`` built from ``row``: each column by name, a missing optional one its default;
    the last field is the row itself."""
    defaults = cls._field_defaults
    try:
        values = [row[n] if n in row else defaults[n] for n in cls._fields[:-1]]
    except KeyError as exc:
        raise ValueError(f"a {_TABLES[cls]} row lacks its {exc.args[0]!r} column") from None
    values.append(row)
    return cls._make(values)


class RunRow(NamedTuple):
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
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """The whole row as the store holds it (the HTTP API's form)."""
        return dict(self.row)


class TaskRow(NamedTuple):
    run_id: str
    task_id: str
    seq: int = 0
    status: str = ""
    attempts: int = 0
    role: str | None = None
    profile: str | None = None
    title: str | None = None
    depends_on: Sequence[str] = ()
    error: Any = None
    handoffs: Sequence[Mapping[str, Any]] = ()
    created_at: str = ""
    updated_at: str = ""
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TaskRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.row)


class ArtifactRow(NamedTuple):
    run_id: str
    artifact_id: str
    seq: int = 0
    path: str = ""
    sha256: str = ""
    type: str | None = None
    media_type: str = ""
    size: int = 0
    producer: Mapping[str, Any] = _EMPTY
    trust: str = ""
    created_at: str = ""
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ArtifactRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.row)


class ContextRow(NamedTuple):
    run_id: str
    context_id: str
    tenant: str
    principal: str
    expires_at: str
    created_at: str = ""
    profile: str | None = None
    agent: str | None = None
    calls_by_tool: Mapping[str, int] = _EMPTY
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ContextRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.row)


class CallRow(NamedTuple):
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
    receipt: Mapping[str, Any] | None = None
    owner: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    resolution: Mapping[str, Any] | None = None
    reserved_seq: int = 0
    updated_seq: int = 0
    created_at: str = ""
    updated_at: str = ""
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CallRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """The row as shown, without the intent's ``secret_marks`` (keyed MACs the kernel
        alone reads, to scrub an operator's note resolving the call)."""
        out = dict(self.row)
        out.pop("secret_marks", None)
        return out


class ApprovalRow(NamedTuple):
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
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ApprovalRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """The row as shown in full, without the request's ``secret_marks`` (keyed MACs the
        kernel alone reads, to scrub a decision's note)."""
        out = dict(self.row)
        out.pop("secret_marks", None)
        return out

    def listed(self) -> dict[str, Any]:
        """The row as listed and shown by default: the clamped preview (``summary``), not the
        whole redacted arguments (``full_arguments``, for operators who ask)."""
        out = self.to_dict()
        out.pop("full_arguments", None)
        return out


class ProposalRow(NamedTuple):
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
    warnings: Sequence[str] = ()
    history: Sequence[Mapping[str, Any]] = ()
    apply: Mapping[str, Any] | None = None
    applied: Mapping[str, Any] | None = None
    row: Mapping[str, Any] = _EMPTY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ProposalRow:
        return _view(cls, row)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.row)


_TABLES: dict[object, str] = {
    RunRow: "runs",
    TaskRow: "tasks",
    ArtifactRow: "artifacts",
    ContextRow: "contexts",
    CallRow: "calls",
    ApprovalRow: "approvals",
    ProposalRow: "proposals",
}


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

    async def read_view(self: _RowSource, view: View[V], *key: str) -> V | None:
        row = await self.get_row(RowKey(table_of(view), key))
        return None if row is None else view.from_row(row)

    async def list_views(self: _RowSource, view: View[V], run_id: str) -> list[V]:
        """Every row of ``view``'s table that belongs to ``run_id``, in table order."""
        return [view.from_row(row) for row in await self.list_rows(table_of(view), run_id)]

    async def find_views(
        self: _RowSource, view: View[V], *, limit: int = 100, **where: Any
    ) -> list[V]:
        rows = await self.query_rows(table_of(view), where, limit=limit)
        return [view.from_row(row) for row in rows]
