"""A ``started`` stage builds its call row at once: the same row, key for key and in the same
key order, as reserving it and then applying what the stage sets (``_dispatched``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import pytest

from charter.ledger import calls_projection as cp
from charter.ledger.rows import Row, RowKey


@dataclass
class _Event:
    payload: Mapping[str, Any]
    run_id: str = "run-1"
    seq: int = 7
    type: str = "tool_progress"
    at: str = "2026-01-01T00:00:00.000000Z"


@dataclass
class _Rows:
    rows: dict[RowKey, Row] = field(default_factory=dict)

    def get(self, key: RowKey) -> Row | None:
        return self.rows.get(key)


def _context(limit: int | None) -> _Rows:
    rows = _Rows()
    payload = {
        "context_id": "ctx-1",
        "tenant": "t",
        "principal": "p",
        "expires_at": "2026-01-02T00:00:00Z",
        "tools": [{"id": "kv.get", "call_limit": limit}],
    }
    rows.rows.update(cp._context_resolved(_Event(payload, type="context_resolved"), rows.get))
    return rows


OPTIONAL: dict[str, list[Any]] = {
    "owner": [None, {"host": "h", "pid": 1}],
    "idempotency_key": [None, "idk-1"],
    "span_id": [None, "span-1", 5],
    "parent_span_id": [None, "span-0", ["x"]],
    "delegates_execution": [None, True, False, "yes"],
}


@pytest.mark.parametrize("limit", [None, 3])
@pytest.mark.parametrize("values", list(product(*OPTIONAL.values())))
def test_the_started_row_is_the_reserved_row_dispatched(
    limit: int | None, values: tuple[Any, ...]
) -> None:
    payload: dict[str, Any] = {
        "stage": "started",
        "context_id": "ctx-1",
        "call_id": "c1",
        "tool_id": "kv.get",
        "fingerprint": "hmac-sha256:fp:00",
        "tenant": "t",
        "arguments": {"bytes": 2, "fields": {}},
    }
    payload.update({k: v for k, v in zip(OPTIONAL, values, strict=True) if v is not None})
    event = _Event(payload)
    ckey = cp.call_key("run-1", "ctx-1", "c1")
    got = cp._tool_progress(event, _context(limit).get)
    want = cp._reserve(event, _context(limit).get, state="dispatching", absent=ckey)
    want[ckey].update(cp._dispatched(event))
    assert repr([(k, list(row.items())) for k, row in got.items()]) == repr(
        [(k, list(row.items())) for k, row in want.items()]
    )
