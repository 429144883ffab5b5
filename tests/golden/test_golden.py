"""Replay the committed golden ledgers; every damaged copy fails with its own reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.ledger.export import verify_directory
from charter.testing.ids import fixed_ledger_key
from tests.golden.golden import KEY, MUTATED, MUTATIONS, SAMPLE, N, export_sample


def test_sample_verifies() -> None:
    # The recorded run's artifact is fictional (a checksum with no file), so the sample holds
    # no artifacts/files/; tests/artifacts_export checks exported files.
    report = verify_directory(SAMPLE, KEY, artifact_files=False)
    assert report.ok, report
    assert report.events == N


def test_sample_without_its_artifact_file_fails() -> None:
    report = verify_directory(SAMPLE, KEY)
    assert (report.reason, report.seq, report.artifact_id) == ("ARTIFACT_MISSING", 10, "actives-1")


def test_sample_is_byte_stable(tmp_path: Path) -> None:
    """Recording the same run today gives byte-identical files: the format did not drift."""
    fresh = tmp_path / "fresh"
    export_sample(fresh)
    committed = sorted(p.relative_to(SAMPLE) for p in SAMPLE.rglob("*") if p.is_file())
    assert committed == sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    for rel in committed:
        assert (fresh / rel).read_bytes() == (SAMPLE / rel).read_bytes(), rel


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_mutated_copy_fails_with_its_reason(case: str) -> None:
    directory = MUTATED / case
    expected = json.loads((directory / "expected.json").read_text())
    report = verify_directory(directory, KEY)
    assert not report.ok
    assert (report.reason, report.seq) == (expected["reason"], expected["seq"])


def test_every_mutation_is_committed() -> None:
    assert sorted(p.name for p in MUTATED.iterdir()) == sorted(MUTATIONS)


def test_wrong_key_fails_the_mac() -> None:
    report = verify_directory(SAMPLE, fixed_ledger_key("someone-else"))
    assert (report.reason, report.seq) == ("LEDGER_MAC_INVALID", N)
