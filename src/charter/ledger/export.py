"""Export a run to the seed's portable layout, and verify such a directory offline.

Layout::

    DIR/manifest.json            the rebuilt manifest, plus "head": {seq, hash, mac}
    DIR/events/00000001.jsonl    one event per file, one compact JSON line ending in "\\n"
    DIR/artifacts/index.json     the artifact index
    DIR/artifacts/files/<path>   each registered artifact's file, at its run-relative path

Each event line is the event's stored bytes with ``,"hash":"sha256:…"`` spliced in before the
closing brace, so the verifier recovers the exact bytes that were hashed by removing that
suffix — nothing is re-serialized. Lines are split on ``\\n`` only; a file that does not end
with one was cut mid-line (``LEDGER_TORN_TAIL``).

Artifact files are read through an :data:`~charter.ledger.verify.ArtifactSource` the caller
passes in (the ledger never imports the artifact store), hashed while they are copied and
checked against the index; ``files/`` keeps them apart from ``index.json`` whatever their
names. Offline verification walks ``artifacts/files/`` without following symlinks, opens each
file component by component with ``O_NOFOLLOW``, and refuses a missing file
(``ARTIFACT_MISSING``), a changed or irregular one (``ARTIFACT_INTEGRITY_MISMATCH``) and any
file the index does not list (``ARTIFACT_UNREGISTERED``); empty directories are ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from charter.errors import InvalidInput, LedgerIntegrityError
from charter.ledger import export_staging
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.checker import headless_problem
from charter.ledger.events import StoredEvent
from charter.ledger.ports import RunSnapshot, Store
from charter.ledger.projections import Row, artifact_index, manifest
from charter.ledger.verify import (
    ArtifactSource,
    ArtifactUnreadable,
    ChainChecker,
    LedgerProblem,
    VerifyReport,
    check_artifact,
    verify_run,
)

logger = logging.getLogger("charter.ledger.export")
_HASH_SUFFIX = re.compile(rb',"hash":"(sha256:[0-9a-f]{64})"\}$')
_EVENT_FILE = re.compile(r"^(\d{8,})\.jsonl$")
_BATCH = 5000
_CHUNK = 1 << 20
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def event_line(row: StoredEvent) -> bytes:
    """The exported line for a stored event (its bytes with the hash spliced in)."""
    return row.data[:-1] + b',"hash":"' + row.hash.encode("ascii") + b'"}\n'


def _json_file(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _safe_parts(path: Any) -> list[str]:
    """A registered path's components, refusing anything that could leave ``files/``."""
    parts = path.split("/") if isinstance(path, str) else [""]
    for part in parts:
        if (
            part in ("", ".", "..")
            or "\\" in part
            or "\x00" in part
            or len(part.encode("utf-8", "surrogatepass")) > 255
        ):
            raise InvalidInput(
                "an artifact's registered path cannot be exported", reason="EXPORT_ARTIFACT_PATH"
            )
    return parts


def _tee(source: ArtifactSource, path: str, out: IO[bytes]) -> Iterator[bytes]:
    for chunk in source(path):  # called on the first read, inside check_artifact
        out.write(chunk)
        yield chunk


def _copy_artifacts(rows: Sequence[Row], source: ArtifactSource, files: Path) -> None:
    """Copy each artifact's file into ``files`` (a fresh private directory), checking it."""
    for row in rows:
        parts = _safe_parts(row["path"])
        target = files.joinpath(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError:
            raise InvalidInput(
                "two artifacts' paths collide in the export", reason="EXPORT_ARTIFACT_PATH"
            ) from None
        with os.fdopen(fd, "wb") as out:
            check_artifact(row, _tee(source, str(row["path"]), out))


async def export_run(
    store: Store,
    run_id: str,
    directory: Path,
    key: LedgerKey,
    *,
    artifacts: ArtifactSource | None = None,
    as_found: bool = False,
    staging_records: Path | None = None,
) -> VerifyReport:
    """Write ``run_id`` to ``directory`` (which must not exist); the ledger must verify.

    The events are checked while they are written; a ledger that fails verification is not
    exported (:class:`~charter.errors.LedgerIntegrityError`). With ``artifacts``, every
    registered artifact's file is copied to ``artifacts/files/<path>`` and must match its
    sha256 and size (``ARTIFACT_MISSING`` / ``ARTIFACT_INTEGRITY_MISMATCH`` otherwise);
    without it only the index is written (such an export verifies only with
    ``artifact_files=False``). The directory appears complete or not at all (written beside
    it, then renamed).

    ``as_found``: a run that fails verification is exported anyway, as evidence, exactly as
    stored (see :func:`_write_as_found`); the report returned is then the failed
    verification. A run that verifies is exported as without it.

    ``staging_records``: a directory (the project's, :func:`export_staging.records_dir`)
    where the staging directory is recorded while it exists, so that a runtime opened after
    this process died removes it (:func:`export_staging.sweep_exports`).
    """
    if directory.exists():
        raise InvalidInput(f"{directory} already exists", reason="EXPORT_TARGET_EXISTS")
    found: VerifyReport | None = None
    if as_found:
        found = await verify_run(store, run_id, key, artifacts=artifacts)
        if found.ok:
            found = None
    snap = None if found is not None else await store.snapshot(run_id)
    if found is None and snap is None:
        headless = headless_problem(await store.read_stored(run_id, after=0, limit=1))
        if headless is not None:
            raise LedgerIntegrityError(
                f"not exported: {headless.message} (to keep a damaged run as evidence, export "
                "it as found: charter runs export --as-found)",
                reason=headless.reason,
                seq=headless.seq,
                run_id=run_id,
            )
        raise InvalidInput("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    record: Path | None = None
    try:
        if staging_records is not None:
            try:
                record = export_staging.begin(staging_records, staging, directory)
            except OSError as exc:  # the export still works; only its sweep after a crash not
                logger.warning(
                    "export staging %s not recorded (%s): if this process dies, remove it by hand",
                    staging,
                    type(exc).__name__,
                )
        (staging / "events").mkdir()
        (staging / "artifacts").mkdir()
        if found is not None:
            report = await _write_as_found(store, found, staging, artifacts)
        else:
            assert snap is not None
            report = await _write_verified(store, snap, staging, key, artifacts)
        os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if record is not None:
            export_staging.end(record)
    return report


async def _write_verified(
    store: Store,
    snap: RunSnapshot,
    staging: Path,
    key: LedgerKey,
    artifacts: ArtifactSource | None,
) -> VerifyReport:
    run_id = snap.head.run_id
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
        registered = snap.tables["artifacts"]
        if artifacts is not None and registered:
            files = staging / "artifacts" / "files"
            files.mkdir()
            await asyncio.to_thread(_copy_artifacts, registered, artifacts, files)
    except LedgerProblem as problem:
        raise LedgerIntegrityError(
            f"not exported: {problem.message} (to keep a damaged run as evidence, export it "
            "as found: charter runs export --as-found)",
            reason=problem.reason,
            seq=problem.seq,
            run_id=run_id,
        ) from None
    assert snap.run is not None
    doc = manifest(snap.run, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq)
    doc["head"] = {"seq": snap.head.seq, "hash": snap.head.hash, "mac": snap.head.mac}
    _json_file(staging / "manifest.json", doc)
    _json_file(
        staging / "artifacts" / "index.json", artifact_index(run_id, snap.tables["artifacts"])
    )
    return VerifyReport(run_id=run_id, ok=True, events=snap.head.seq, head_seq=snap.head.seq)


def _stored_line(row: StoredEvent) -> bytes:
    """An event's exported line; a stored event that is not a JSON object keeps its bytes
    (newlines escaped, to stay one line): the hash cannot be spliced in, and offline
    verification reports it."""
    if row.data.endswith(b"}") and b"\n" not in row.data:
        return event_line(row)
    return row.data.replace(b"\n", b"\\n") + b"\n"


def _parsed(data: bytes) -> Any:
    """A stored projection row as JSON if it parses, else its text (it is evidence)."""
    try:
        return json.loads(data)
    except ValueError:
        return {"unparsed": data.decode("utf-8", "replace")}


def _copy_as_found(rows: Sequence[Row], source: ArtifactSource, files: Path) -> list[Row]:
    """Copy what can be read of each artifact's file; list what is missing or different."""
    problems: list[Row] = []
    for row in rows:
        where = {"artifact_id": row.get("artifact_id"), "path": row.get("path")}
        try:
            parts = _safe_parts(row.get("path"))
            target = files.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except (InvalidInput, OSError):
            problems.append({**where, "reason": "EXPORT_ARTIFACT_PATH"})
            continue
        with os.fdopen(fd, "wb") as out:
            try:
                check_artifact(row, _tee(source, str(row["path"]), out))
            except LedgerProblem as problem:
                problems.append({**where, "reason": problem.reason})
                if problem.reason == "ARTIFACT_MISSING":
                    target.unlink()
            except Exception as exc:  # evidence: copy what can be read, list the rest
                problems.append({**where, "reason": type(exc).__name__})
    return problems


async def _write_as_found(
    store: Store, found: VerifyReport, staging: Path, artifacts: ArtifactSource | None
) -> VerifyReport:
    """Write a run that failed verification as stored, unchecked.

    Every stored event (however many, whatever the head says) as its exported line,
    ``projections.json`` with every projection row as stored (parsed where it parses),
    ``artifacts/index.json`` from the artifact rows that parse, what can be read of each
    artifact's file (with ``artifacts`` given), and a manifest saying the run is NOT
    verified, with the first problem verification found. Offline verification of such a
    directory never passes (:func:`verify_directory`).
    """
    run_id = found.run_id
    stored = await store.stored_snapshot(run_id)
    count, after = 0, 0
    while True:
        rows = list(await store.read_stored(run_id, after=after, limit=_BATCH))
        if not rows:
            break
        for row in rows:
            (staging / "events" / f"{row.seq:08d}.jsonl").write_bytes(_stored_line(row))
        count += len(rows)
        after = rows[-1].seq
    tables = {} if stored is None else stored.tables
    parsed = {t: [_parsed(r) for r in rows] for t, rows in sorted(tables.items())}
    run_row = None if stored is None or stored.run is None else _parsed(stored.run)
    _json_file(staging / "projections.json", {"run": run_row, "tables": parsed})
    artifact_rows = [r for r in parsed.get("artifacts", []) if isinstance(r, dict)]
    artifact_rows = [r for r in artifact_rows if "unparsed" not in r]
    problems: list[Row] = []
    try:
        _json_file(staging / "artifacts" / "index.json", artifact_index(run_id, artifact_rows))
    except (KeyError, TypeError, ValueError):
        problems.append({"artifact_id": None, "path": None, "reason": "INDEX_UNREADABLE"})
    if artifacts is not None and artifact_rows:
        files = staging / "artifacts" / "files"
        files.mkdir()
        problems += await asyncio.to_thread(_copy_as_found, artifact_rows, artifacts, files)
    head = None if stored is None else stored.head
    problem = {"reason": found.reason, "seq": found.seq, "message": found.message}
    if found.artifact_id is not None:
        problem |= {"artifact_id": found.artifact_id, "path": found.path}
    doc = {
        "run_id": run_id,
        "as_found": True,
        "verified": False,
        "warning": "exported as found: this run FAILED verification; nothing here is verified",
        "problem": problem,
        "head": None if head is None else {"seq": head.seq, "hash": head.hash, "mac": head.mac},
        "events": count,
        "artifact_problems": problems,
    }
    _json_file(staging / "manifest.json", doc)
    return VerifyReport(
        run_id=run_id,
        ok=False,
        events=count,
        head_seq=None if head is None else head.seq,
        reason=found.reason,
        seq=found.seq,
        message=found.message,
        artifact_id=found.artifact_id,
        path=found.path,
    )


def _no_head(directory: Path, doc: Any) -> str:
    """Why an export's head cannot be read: a directory that is not an export at all is told
    apart from a manifest that was damaged."""
    if not (directory / "manifest.json").is_file():
        return (
            "there is no manifest.json in the directory: not a directory written by "
            "`charter runs export` (or its manifest was removed)"
        )
    if doc is None:
        return "manifest.json cannot be read as JSON"
    return "manifest.json has no head"


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


def _exported_files(files: Path) -> dict[str, bool]:
    """Every non-directory entry below ``files`` (never following a symlink): is it regular?"""
    found: dict[str, bool] = {}
    try:
        root = os.open(files, _DIR_FLAGS)
    except FileNotFoundError:
        return found
    except OSError:
        raise LedgerProblem(
            "ARTIFACT_UNREGISTERED", None, "artifacts/files is not a plain directory"
        ) from None
    stack = [(root, "")]
    try:
        while stack:
            fd, prefix = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        rel = prefix + entry.name
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), rel + "/"))
                        else:
                            found[rel] = entry.is_file(follow_symlinks=False)
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return found


def _exported_chunks(files: Path, path: str, found: dict[str, bool]) -> Iterator[bytes]:
    """An exported artifact's bytes, opened component by component without following links."""
    regular = found.get(path)
    if regular is None:
        raise ArtifactUnreadable(missing=True)
    if not regular:
        raise ArtifactUnreadable(missing=False)
    parts = path.split("/")
    fd = os.open(files, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        file_fd = os.open(parts[-1], _READ_FLAGS, dir_fd=fd)
    except OSError:
        raise ArtifactUnreadable(missing=False) from None
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ArtifactUnreadable(missing=False)
        while chunk := f.read(_CHUNK):
            yield chunk


def _check_exported_files(files: Path, rows: Sequence[Row]) -> None:
    found = _exported_files(files)
    for row in rows:
        check_artifact(row, _exported_chunks(files, str(row["path"]), found))
    extra = sorted(set(found) - {str(row["path"]) for row in rows})
    if extra:
        raise LedgerProblem(
            "ARTIFACT_UNREGISTERED",
            None,
            f"{len(extra)} file(s) under artifacts/files/ are not in the artifact index",
            path=extra[0],
        )


def verify_directory(
    directory: Path, key: LedgerKey | None, *, artifact_files: bool = True
) -> VerifyReport:
    """Verify an exported run offline, with the same reasons as :func:`verify_run`; with
    ``key`` None everything but the head's MAC (the caller says so).

    Then (unless ``artifact_files`` is false) every file under ``artifacts/files/`` against the
    index: each listed artifact present with its sha256 and size, nothing else there.
    """
    doc = _read_json(directory / "manifest.json")
    run_id = doc.get("run_id") if isinstance(doc, dict) else None
    run_id = run_id if isinstance(run_id, str) else "?"
    if isinstance(doc, dict) and doc.get("as_found") is not None:
        return _verify_as_found(directory, doc, run_id, key)
    checker = ChainChecker(run_id)
    head_seq: int | None = None
    count = 0
    try:
        if not isinstance(doc, dict) or not isinstance(doc.get("head"), dict):
            raise LedgerProblem("LEDGER_HEAD_MISMATCH", None, _no_head(directory, doc))
        h = doc["head"]
        head = Head(run_id=run_id, seq=int(h["seq"]), hash=str(h["hash"]), mac=str(h["mac"]))
        head_seq = head.seq
        for seq, path in _event_files(directory):
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
        rows = checker.rebuild.listed("artifacts", run_id)
        checker.compare(
            "artifacts/index.json",
            _read_json(directory / "artifacts" / "index.json"),
            artifact_index(run_id, rows),
        )
        if artifact_files:
            _check_exported_files(directory / "artifacts" / "files", rows)
    except LedgerProblem as problem:
        return problem.report(run_id, events=count, head_seq=head_seq)
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


def _event_files(directory: Path) -> list[tuple[int, Path]]:
    """An export's event files (``events/00000001.jsonl`` …) with their sequences, in order."""
    events_dir = directory / "events"
    files: list[tuple[int, Path]] = []
    for path in events_dir.iterdir() if events_dir.is_dir() else ():
        match = _EVENT_FILE.fullmatch(path.name)
        if match:
            files.append((int(match.group(1)), path))
    return sorted(files)


def _verify_as_found(
    directory: Path, doc: dict[str, Any], run_id: str, key: LedgerKey | None
) -> VerifyReport:
    """An export written as found never passes: the first problem its events and head show,
    else the problem its manifest records (found in the store: a projection row, an
    artifact file)."""
    checker = ChainChecker(run_id)
    count = 0
    h = doc.get("head")
    head_seq: int | None = None
    if isinstance(h, dict) and isinstance(h.get("seq"), int):
        head_seq = h["seq"]
    note = "exported as found, not verified: "
    try:
        for seq, path in _event_files(directory):
            checker.feed(_row_from_file(seq, path.read_bytes()))
            count += 1
        if not isinstance(h, dict):
            raise LedgerProblem("LEDGER_HEAD_MISMATCH", None, "the export has no stored head")
        checker.check_head(
            Head(run_id=run_id, seq=int(h["seq"]), hash=str(h["hash"]), mac=str(h["mac"])), key
        )
    except LedgerProblem as problem:
        report = problem.report(run_id, events=count, head_seq=head_seq)
        return replace(report, message=note + str(report.message))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return VerifyReport(
            run_id=run_id,
            ok=False,
            events=count,
            head_seq=head_seq,
            reason="LEDGER_HEAD_MISMATCH",
            message=f"{note}the export cannot be read: {type(exc).__name__}",
        )
    recorded = doc.get("problem")
    recorded = recorded if isinstance(recorded, dict) else {}
    reason, at = recorded.get("reason"), recorded.get("seq")
    return VerifyReport(
        run_id=run_id,
        ok=False,
        events=count,
        head_seq=head_seq,
        reason=_text(reason) or "SNAPSHOT_DIVERGENCE",
        seq=at if isinstance(at, int) else None,
        message=note + (_text(recorded.get("message")) or "the manifest names no problem"),
        artifact_id=_text(recorded.get("artifact_id")),
        path=_text(recorded.get("path")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
