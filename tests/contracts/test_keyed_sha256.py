"""KeyedSha256 (the fingerprints' HMAC from two precomputed hash states) is HMAC-SHA256."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from charter.contracts.canonical import Fingerprinter, KeyedSha256
from charter.contracts.intake import Intake


@given(key=st.binary(max_size=200), message=st.binary(max_size=500))
def test_keyed_sha256_is_hmac_sha256(key: bytes, message: bytes) -> None:
    # keys shorter than, equal to and longer than the block (64 bytes: hashed first)
    keyed = KeyedSha256(key)
    expected = hmac.new(key, message, hashlib.sha256).hexdigest()
    assert keyed.hexdigest(message) == expected
    assert keyed.hexdigest(message) == expected  # the key's states are not consumed


def test_fingerprints_are_hmac_sha256_of_the_canonical_json() -> None:
    key = b"k" * 32
    fp = Fingerprinter("k1", key)
    want = hmac.new(key, b'{"a":1,"b":"x"}', hashlib.sha256).hexdigest()
    assert fp.fingerprint({"b": "x", "a": 1}) == f"hmac-sha256:k1:{want}"
    intake = Intake({"type": "object"}, fp)
    assert intake.accept_value({"b": "x", "a": 1}).fingerprint == f"hmac-sha256:k1:{want}"
    assert intake.accept('{"a": 1, "b": "x"}').fingerprint == f"hmac-sha256:k1:{want}"
