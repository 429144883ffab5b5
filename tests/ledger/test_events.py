"""Stored bytes are RFC 8785 canonical JSON of the event without its hash."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.contracts.canonical import canonical_bytes
from charter.ledger.chain import LedgerKey, chain_hash
from charter.ledger.events import (
    EVENT_TYPES,
    GENESIS_HASH,
    OBSERVATIONAL_TYPES,
    StoredEvent,
    decode,
    event_id,
    expected_frame,
    format_at,
    payload_bytes,
    stored_bytes,
)
from charter.ledger.ids import IDENTIFIER, is_identifier, new_id
from charter.testing.ids import DeterministicHex

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    payload=st.dictionaries(st.text(max_size=6), json_values, max_size=4), seq=st.integers(1, 10**9)
)
def test_stored_bytes_are_canonical(payload: dict[str, Any], seq: int) -> None:
    at = "2025-01-01T00:00:00.000000Z"
    doc = {
        "schema_version": 1,
        "run_id": "run-1",
        "seq": seq,
        "event_id": event_id(seq),
        "type": "task_progress",
        "at": at,
        "payload": payload,
        "prev_hash": GENESIS_HASH,
    }
    data = stored_bytes(
        run_id="run-1",
        seq=seq,
        type="task_progress",
        at=at,
        payload_bytes=payload_bytes(payload),
        prev_hash=GENESIS_HASH,
    )
    assert data == canonical_bytes(doc)
    row = StoredEvent(
        run_id="run-1",
        seq=seq,
        type="task_progress",
        at=at,
        prev_hash=GENESIS_HASH,
        hash=chain_hash(GENESIS_HASH, data),
        data=data,
    )
    prefix, suffix = expected_frame(row)
    assert data.startswith(prefix)
    assert data.endswith(suffix)
    assert decode(row).payload == payload


def test_hash_covers_prev_hash_and_bytes() -> None:
    assert chain_hash(GENESIS_HASH, b"{}") != chain_hash("sha256:" + "1" * 64, b"{}")
    assert chain_hash(GENESIS_HASH, b"{}").startswith("sha256:")


def test_event_types_registry() -> None:
    assert OBSERVATIONAL_TYPES <= EVENT_TYPES
    assert {"run_created", "artifact_registered", "context_resolved"} <= EVENT_TYPES
    assert all(IDENTIFIER.fullmatch(t) for t in EVENT_TYPES)


def test_ids() -> None:
    ids = DeterministicHex("x")
    first = new_id("run", hex_source=ids)
    assert first.startswith("run-")
    assert len(first) == len("run-") + 12
    assert is_identifier(first)
    assert new_id("run", hex_source=DeterministicHex("x")) == first
    assert not is_identifier("-leading")
    assert not is_identifier("a" * 129)
    assert not is_identifier("a/b")
    assert is_identifier("a" * 128)


def test_format_at_needs_aware_time() -> None:
    from datetime import UTC, datetime

    assert format_at(datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC)) == "2025-01-02T03:04:05.000006Z"
    with pytest.raises(ValueError):
        format_at(datetime(2025, 1, 2))


def test_mac_depends_on_every_part_and_the_key() -> None:
    key = LedgerKey("k1", b"s" * 32)
    mac = key.mac("run-1", 3, "sha256:aa")
    assert key.mac_matches("run-1", 3, "sha256:aa", mac)
    assert not key.mac_matches("run-1", 4, "sha256:aa", mac)
    assert not key.mac_matches("run-2", 3, "sha256:aa", mac)
    assert not LedgerKey("k1", b"t" * 32).mac_matches("run-1", 3, "sha256:aa", mac)
    assert mac.startswith("hmac-sha256:k1:")


@pytest.mark.parametrize("length", [16, 32, 63, 64, 65, 200])
def test_macs_are_hmac_sha256_for_every_key_length(length: int) -> None:
    """The precomputed pads give exactly the standard library's HMAC-SHA256 (keys longer than
    a block are hashed first)."""
    import hmac

    secret = bytes(range(length))
    key = LedgerKey("k1", secret)
    head = hmac.digest(secret, b"run-1|3|sha256:aa", "sha256").hex()
    assert key.mac("run-1", 3, "sha256:aa") == f"hmac-sha256:k1:{head}"
    row = hmac.digest(secret, b"row\x00calls\x00run-1\x00c-1\x007\x00{}", "sha256").hex()
    assert key.row_mac("calls", ("run-1", "c-1"), b"{}", 7) == row
