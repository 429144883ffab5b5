"""Deterministic ids and keys for tests: same seed, same ids, same hashes."""

from __future__ import annotations

import hashlib

from charter.ledger.chain import LedgerKey


class DeterministicHex:
    """A drop-in for :func:`secrets.token_hex`: ``n`` bytes of hex from a seeded counter."""

    def __init__(self, seed: str = "charter") -> None:
        self.seed = seed
        self.count = 0

    def __call__(self, nbytes: int) -> str:
        self.count += 1
        digest = hashlib.sha256(f"{self.seed}:{self.count}".encode()).hexdigest()
        return digest[: 2 * nbytes]


def fixed_ledger_key(name: str = "test") -> LedgerKey:
    """A fixed ledger key for tests and golden ledgers (never use it for real data)."""
    return LedgerKey(f"{name}-key", hashlib.sha256(f"charter-test-key:{name}".encode()).digest())
