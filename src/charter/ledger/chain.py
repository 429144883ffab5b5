"""The hash chain and the keyed MAC over a run's head.

``hash(n) = "sha256:" + sha256(prev_hash(n) ‖ stored_bytes(n))`` links each event to the one
before it. The head ``(seq, hash)`` is kept apart from the events (the ``run_heads`` table, or
``manifest.json`` in an export) with ``mac = HMAC-SHA256(ledger_key, run_id | seq | hash)``.
Deleting, reordering or rewriting events breaks the chain; cutting the tail disagrees with the
head; recomputing the whole chain after an edit cannot produce a valid MAC without the key,
which comes from configuration and is never stored in the database. Projection rows carry a
MAC of their own (:meth:`LedgerKey.row_mac`) over table, key, stored bytes and sequence.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from typing import Any

from charter.errors import ConfigError
from charter.ledger.slots import slot_setters

_BLOCK = 64  # SHA-256's block size, in bytes
_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def key_material(raw: bytes, *, what: str) -> bytes:
    """The secret bytes of a ledger key **file**, read the one way every reader reads it.

    The file named by ``CHARTER_LEDGER_KEY_FILE``, the deployment's ``secrets.ledger_key:
    {file: PATH}`` and the local ``.charter/ledger.key`` all pass through here, so one file is
    one key whichever way it is named: its bytes are the key, a trailing newline dropped (as
    for every secret file of a deployment). Hex or base64 text is *not* decoded — the text is
    the key (what ``charter init`` writes: 64 hex characters). Fewer than 16 bytes is refused,
    naming ``what``, never the value.
    """
    secret = raw.rstrip(b"\r\n")
    if len(secret) < 16:
        raise ConfigError(
            f"the ledger key in {what} is shorter than 16 bytes (the file's bytes are the key: "
            "write 32 random bytes, or e.g. `openssl rand -hex 32`)"
        )
    return secret


def chain_hash(prev_hash: str, data: bytes) -> str:
    digest = hashlib.sha256(prev_hash.encode("ascii"))
    digest.update(data)
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class LedgerKey:
    """The secret that MACs run heads. ``key_id`` names it (stored beside the MAC)."""

    key_id: str
    secret: bytes = field(repr=False)
    # HMAC-SHA256 (RFC 2104) keyed once: the SHA-256 states after absorbing the key's inner
    # and outer pads. Copying them per MAC skips the key schedule and OpenSSL's per-call
    # algorithm fetch of ``hmac.digest``; the MACs are the same bytes (tests/ledger).
    _inner: Any = field(init=False, repr=False, compare=False)
    _outer: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _KEY_ID.fullmatch(self.key_id):
            raise ConfigError(f"ledger key id must match {_KEY_ID.pattern}")
        if len(self.secret) < 16:
            raise ConfigError("a ledger key must be at least 16 bytes long")
        block = self.secret
        if len(block) > _BLOCK:
            block = hashlib.sha256(block).digest()
        block = block.ljust(_BLOCK, b"\0")
        object.__setattr__(self, "_inner", hashlib.sha256(bytes(b ^ 0x36 for b in block)))
        object.__setattr__(self, "_outer", hashlib.sha256(bytes(b ^ 0x5C for b in block)))

    def _hmac(self, message: bytes) -> str:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        digest: str = outer.hexdigest()
        return digest

    @classmethod
    def derive_id(cls, secret: bytes) -> LedgerKey:
        """A key whose id is a short digest of the secret (so a wrong key is named as such)."""
        return cls(
            "k-" + hashlib.sha256(b"charter-ledger-key-id\x00" + secret).hexdigest()[:12], secret
        )

    def mac(self, run_id: str, seq: int, head_hash: str) -> str:
        digest = self._hmac(f"{run_id}|{seq}|{head_hash}".encode())
        return f"hmac-sha256:{self.key_id}:{digest}"

    def mac_matches(self, run_id: str, seq: int, head_hash: str, mac: str) -> bool:
        return same_mac(self.mac(run_id, seq, head_hash), mac)

    def text_mac(self, kind: str, parts: tuple[str, ...]) -> str:
        """``hmac-sha256:<key-id>:<hex>`` over ``kind`` and ``parts`` (NUL-separated: values
        that hold a NUL must be encoded first). Rows kept outside the ledger (a conversation's
        history) carry it, with the key id as a head MAC does."""
        digest = self._hmac("\x00".join((kind, *parts)).encode("utf-8", "surrogatepass"))
        return f"hmac-sha256:{self.key_id}:{digest}"

    def row_mac(self, table: str, key: tuple[str, ...], data: bytes, seq: int) -> str:
        """The MAC of a projection row: its table, key, stored bytes and the sequence of the
        event that last wrote it (key values are identifiers: no NUL inside)."""
        # the text parts joined and encoded at once: the same bytes as joining their encodings;
        # the stored bytes follow them into the digest without being copied after them
        inner = self._inner.copy()
        inner.update("\x00".join(("row", table, *key, str(seq), "")).encode())
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        digest: str = outer.hexdigest()
        return digest


@dataclass(frozen=True, slots=True, kw_only=True)
class Head:
    """A run's head: its last sequence number and hash, and the MAC that binds them."""

    run_id: str
    seq: int
    hash: str
    mac: str


_new = object.__new__
_HEAD = slot_setters(Head, ("run_id", "seq", "hash", "mac"))


def new_head(run_id: str, seq: int, head_hash: str, mac: str) -> Head:
    """``Head(run_id=…, seq=…, hash=…, mac=…)`` without the dataclass ``__init__`` (see
    :mod:`charter.ledger.slots`): the same frozen object."""
    s_run, s_seq, s_hash, s_mac = _HEAD
    head: Head = _new(Head)
    s_run(head, run_id)
    s_seq(head, seq)
    s_hash(head, head_hash)
    s_mac(head, mac)
    return head


def same_mac(expected: str, stored: object) -> bool:
    """Constant-time equality of a MAC and what a store holds for it, whatever a hand edit
    left there: ``hmac.compare_digest`` raises for ``str`` with non-ASCII characters and for
    a ``str`` against ``bytes``, and such a value is simply not the MAC."""
    offered = stored if isinstance(stored, str) else str(stored)
    return hmac.compare_digest(expected.encode(), offered.encode("utf-8", "surrogatepass"))
