"""The shape of projection rows: a row, its key, its table, and a handler's signature.

:mod:`charter.ledger.projections` (runs, tasks, artifacts) and the kernel's projections
(:mod:`charter.ledger.calls_projection`, :mod:`charter.ledger.proposals_projection`) all build
on these; ``projections`` assembles the tables and handlers of all three.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from charter.ledger.jsonload import loads

Row = dict[str, Any]


class RowKey(NamedTuple):
    """A projection row's address: its table and its key columns' values.

    A named tuple rather than a dataclass: handlers build several per event and every store
    hashes them, and a tuple is built and hashed in C.
    """

    table: str
    key: tuple[str, ...]


new_row_key = tuple.__new__
"""``new_row_key(RowKey, (table, key))`` is ``RowKey(table, key)`` without the named tuple's
Python-level ``__new__``: a frame less per key, and the append path builds a dozen keys per
governed call."""


class EventFacts(Protocol):
    """What a projection handler reads of an event: :class:`~charter.ledger.events.Event`
    has it, and so does verification's lighter view of an event it has just parsed. A handler
    must not keep the object beyond its call."""

    @property
    def run_id(self) -> str: ...

    @property
    def seq(self) -> int: ...

    @property
    def type(self) -> str: ...

    @property
    def at(self) -> str: ...

    @property
    def payload(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSpec:
    """A projection table: key columns, indexed columns copied out of the data, list order."""

    name: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    order_by: str
    fixed: tuple[str, ...] = ()
    """Columns set when the row is first written and never changed after (a call's tool and
    tenant): an update leaves them, and the indexes on them, alone — one page fewer written
    per index and commit. A stored copy edited by hand is still refused on read (its row's
    text says otherwise) and reported by verification."""

    @property
    def compared(self) -> tuple[str, ...]:
        """The columns outside ``data`` that verification compares with the rebuilt row: the
        keys after ``run_id`` (a row's own id: an id changed in place would hide the row from
        every lookup of it) and the indexed columns."""
        return (*self.keys[1:], *self.columns)

    def sort_key(self, row: Row) -> tuple[Any, ...]:
        """List order: ``order_by``, ties broken by the key columns (as the SQL stores do)."""
        return (row[self.order_by], *(row[k] for k in self.keys))


Getter = Callable[[RowKey], Row | None]
Writes = dict[RowKey, Row]


@dataclass(frozen=True, slots=True, kw_only=True)
class Handler:
    reads: Callable[[str, Mapping[str, Any]], tuple[RowKey, ...]]
    apply: Callable[[EventFacts, Getter], Writes]


_orjson_loads = orjson.loads


def parse_own(data: bytes | str) -> Row:
    """A fresh row parsed from canonical JSON that this process wrote (``canonical_bytes``).

    On such text orjson gives exactly what ``json.loads`` gives (no ``NaN``, no lone
    surrogate, integers within ±(2**53 - 1), floats in their shortest round-trip form), so
    :func:`charter.ledger.jsonload.loads` and its second encoding pass, which guard text read
    from storage, are not needed. Text orjson refuses (nesting beyond its limit) is parsed as
    ``loads`` does.
    """
    try:
        row: Row = _orjson_loads(data)
    except orjson.JSONDecodeError:
        row = loads(data if isinstance(data, bytes) else data.encode())
    return row
