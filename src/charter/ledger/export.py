"""Export a run to the seed's portable layout, and verify such a directory offline.

Layout::

    DIR/manifest.json            the rebuilt manifest, plus "head": {seq, hash, mac}
    DIR/events/00000001.jsonl    one event per file, one compact JSON line ending in "\\n"
    DIR/artifacts/index.json     the artifact index

Each event line is the event's stored bytes with ``,"hash":"sha256:…"`` spliced in before the
closing brace, so the verifier recovers the exact bytes that were hashed by removing that
suffix — nothing is re-serialized. Lines are split on ``\\n`` only; a file that does not end
with one was cut mid-line (``LEDGER_TORN_TAIL``). Artifact files themselves are not copied
yet (the artifact store arrives with its own issue).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from charter.errors import InvalidInput, LedgerIntegrityError
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.events import StoredEvent
from charter.ledger.ports import Store
from charter.ledger.projections import artifact_index, manifest
from charter.ledger.verify import ChainChecker, LedgerProblem, VerifyReport

_HASH_SUFFIX = re.compile(rb',"hash":"(sha256:[0-9a-f]{64})"\}$')
_EVENT_FILE = re.compile(r"^(\d{8,})\.jsonl$")
_BATCH = 5000


def event_line(row: StoredEvent) -> bytes:
    """The exported line for a stored event (its bytes with the hash spliced in)."""
    return row.data[:-1] + b',"hash":"' + row.hash.encode("ascii") + b'"}\n'


def _json_file(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


async def export_run(store: Store, run_id: str, directory: Path, key: LedgerKey) -> VerifyReport:
    """Write ``run_id`` to ``directory`` (which must not exist); the ledger must verify.

    The events are checked while they are written; a ledger that fails verification is not
    exported (:class:`~charter.errors.LedgerIntegrityError`). The directory appears complete
    or not at all (written beside it, then renamed).
    """
    if directory.exists():
        raise InvalidInput(f"{directory} already exists", reason="EXPORT_TARGET_EXISTS")
    snap = await store.snapshot(run_id)
    if snap is None:
        raise InvalidInput("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        (staging / "events").mkdir()
        (staging / "artifacts").mkdir()
        checker = ChainChecker(run_id)
        after = 0
        try:
            while after < snap.head.seq:
                rows = [
                    r
                    for r in await store.read_stored(run_id, after=after, limit=_BATCH)
                    if r.seq <= snap.head.seq
                ]
                if not rows:
                    break
                for row in rows:
                    checker.feed(row)
                    (staging / "events" / f"{row.seq:08d}.jsonl").write_bytes(event_line(row))
                after = rows[-1].seq
            checker.check_head(snap.head, key)
            checker.compare_tables(snap.run, snap.tables)
        except LedgerProblem as problem:
            raise LedgerIntegrityError(
                f"not exported: {problem.message}",
                reason=problem.reason,
                seq=problem.seq,
                run_id=run_id,
            ) from None
        assert snap.run is not None
        doc = manifest(
            snap.run, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq
        )
        doc["head"] = {"seq": snap.head.seq, "hash": snap.head.hash, "mac": snap.head.mac}
        _json_file(staging / "manifest.json", doc)
        _json_file(
            staging / "artifacts" / "index.json", artifact_index(run_id, snap.tables["artifacts"])
        )
        os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return VerifyReport(run_id=run_id, ok=True, events=snap.head.seq, head_seq=snap.head.seq)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _row_from_file(seq: int, content: bytes) -> StoredEvent:
    if not content.endswith(b"\n"):
        raise LedgerProblem("LEDGER_TORN_TAIL", seq, f"event file {seq:08d} ends mid-line")
    lines = content.split(b"\n")
    if len(lines) != 2:
        raise LedgerProblem("LEDGER_HASH_MISMATCH", seq, f"event file {seq:08d} is not one line")
    line = lines[0]
    match = _HASH_SUFFIX.search(line)
    if match is None:
        raise LedgerProblem("LEDGER_HASH_MISMATCH", seq, f"event {seq} has no hash")
    data = line[: match.start()] + b"}"
    try:
        doc = json.loads(data)
        return StoredEvent(
            run_id=str(doc["run_id"]),
            seq=seq,
            type=str(doc["type"]),
            at=str(doc["at"]),
            prev_hash=str(doc["prev_hash"]),
            hash=match.group(1).decode("ascii"),
            data=data,
        )
    except (ValueError, KeyError, TypeError):
        raise LedgerProblem("LEDGER_HASH_MISMATCH", seq, f"event {seq} is not valid JSON") from None


def verify_directory(directory: Path, key: LedgerKey) -> VerifyReport:
    """Verify an exported run offline, with the same reasons as :func:`verify_run`."""
    doc = _read_json(directory / "manifest.json")
    run_id = doc.get("run_id") if isinstance(doc, dict) else None
    run_id = run_id if isinstance(run_id, str) else "?"
    checker = ChainChecker(run_id)
    head_seq: int | None = None
    count = 0
    try:
        if not isinstance(doc, dict) or not isinstance(doc.get("head"), dict):
            raise LedgerProblem("LEDGER_HEAD_MISMATCH", None, "manifest.json has no head")
        h = doc["head"]
        head = Head(run_id=run_id, seq=int(h["seq"]), hash=str(h["hash"]), mac=str(h["mac"]))
        head_seq = head.seq
        files: list[tuple[int, Path]] = []
        events_dir = directory / "events"
        for path in events_dir.iterdir() if events_dir.is_dir() else ():
            match = _EVENT_FILE.fullmatch(path.name)
            if match:
                files.append((int(match.group(1)), path))
        for seq, path in sorted(files):
            checker.feed(_row_from_file(seq, path.read_bytes()))
            count += 1
        checker.check_head(head, key)
        run = checker.rebuild.run(run_id)
        assert run is not None
        rebuilt = manifest(
            run,
            checker.rebuild.listed("tasks", run_id),
            checker.rebuild.listed("artifacts", run_id),
            head_seq=head.seq,
        )
        checker.compare("manifest.json", {k: v for k, v in doc.items() if k != "head"}, rebuilt)
        checker.compare(
            "artifacts/index.json",
            _read_json(directory / "artifacts" / "index.json"),
            artifact_index(run_id, checker.rebuild.listed("artifacts", run_id)),
        )
    except LedgerProblem as problem:
        return VerifyReport(
            run_id=run_id,
            ok=False,
            events=count,
            head_seq=head_seq,
            reason=problem.reason,
            seq=problem.seq,
            message=problem.message,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return VerifyReport(
            run_id=run_id,
            ok=False,
            events=count,
            head_seq=head_seq,
            reason="LEDGER_HEAD_MISMATCH",
            message=f"the export cannot be read: {type(exc).__name__}",
        )
    return VerifyReport(run_id=run_id, ok=True, events=count, head_seq=head_seq)
