"""Helpers that damage ledgers the way an attacker or a broken disk would."""

from __future__ import annotations

from collections.abc import Sequence

from charter.ledger.chain import chain_hash
from charter.ledger.events import StoredEvent


def rechain(rows: Sequence[StoredEvent], start: int) -> list[StoredEvent]:
    """Recompute prev_hash/hash (bytes included) from index ``start`` on — no key needed."""
    out = list(rows[:start])
    prev = out[-1].hash if out else rows[0].prev_hash
    for row in rows[start:]:
        data = row.data.replace(row.prev_hash.encode(), prev.encode())
        digest = chain_hash(prev, data)
        out.append(
            StoredEvent(
                run_id=row.run_id,
                seq=row.seq,
                type=row.type,
                at=row.at,
                prev_hash=prev,
                hash=digest,
                data=data,
            )
        )
        prev = digest
    return out
