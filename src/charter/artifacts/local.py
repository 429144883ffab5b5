"""The local artifact store: one directory per run under a root (default ``.charter/artifacts``).

Layout::

    <root>/<run_id>/<artifact path>          published artifacts
    <root>/<run_id>/.staging/w-<hex>         a write in progress (private temporary name)
    <root>/<run_id>/.staging/a-<call>.<n>    a subprocess executor's staging area

Every path component below the run directory is opened relative to its parent's descriptor
with ``O_NOFOLLOW`` (see :mod:`charter.artifacts._fs`). A write goes to a private temporary file
created with ``O_EXCL`` in ``.staging/``, is hashed as it is written, ``fsync``-ed on close and
published with a rename that never replaces anything, then the target directory is
``fsync``-ed. A writer that fails (an exception in its block, a limit, a refused path) removes
its temporary file; nothing was ever visible under the artifact's name.

The run's quotas (bytes and files) are checked against running totals
(:class:`~charter.artifacts.usage.RunUsage`): the run directory is walked the first time the
store touches the run (and again once the totals are a minute old), and the totals are updated
by every publication, accepted staging area and rollback — a write costs the same in a run of
10 files or 10,000.
Concurrent writers may together pass the byte quota by their in-flight bytes.
Each staging entry is locked by its writer (``flock``); :meth:`LocalArtifactStore.sweep`
(run when a runtime opens) removes the entries of writers that died (:mod:`.sweep`).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from charter.artifacts import _fs, failures
from charter.artifacts.names import (
    MAX_DEPTH,
    check_path,
    normal_path,
    split_reference,
    versions,
)
from charter.artifacts.reading import VerifyingReader
from charter.artifacts.records import (
    ObjectInfo,
    StagingArea,
    StagingLimits,
    StoredObject,
    check_sha256,
)
from charter.artifacts.staging import Tally, check_declared
from charter.artifacts.sweep import Leftover, lock_held, sweep_staging
from charter.artifacts.usage import DEFAULT_QUOTA_FILES, RunUsage, Totals
from charter.errors import Failure, InvalidInput
from charter.ledger.ids import check_identifier

DEFAULT_ROOT = ".charter/artifacts"
DEFAULT_QUOTA_BYTES = 1 << 30
STAGING = ".staging"
_CHUNK = 1 << 20
_BUFFER = 1 << 18
_AREA = re.compile(r"^a-[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.[0-9]{1,9}$")


def _digest(h: hashlib._Hash) -> str:
    return "sha256:" + h.hexdigest()


class LocalArtifactStore:
    """Artifacts on the local file system, confined to their run's directory."""

    def __init__(
        self,
        root: str | os.PathLike[str] = DEFAULT_ROOT,
        *,
        quota_bytes: int | None = DEFAULT_QUOTA_BYTES,
        quota_files: int | None = DEFAULT_QUOTA_FILES,
        max_file_bytes: int | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        self.quota_bytes = quota_bytes
        self.quota_files = quota_files
        self.max_file_bytes = max_file_bytes
        self.root.mkdir(parents=True, exist_ok=True)
        self.usage_totals = RunUsage(
            quota_bytes=quota_bytes, quota_files=quota_files, measure=self._measure
        )
        # Staging areas this process opened: their directory's lock, held until accepted or
        # discarded, tells a sweep in another process that the area's writer is alive.
        self._area_locks: dict[tuple[str, str], int] = {}

    # -- resolution -----------------------------------------------------------------------

    def _resolve(self, run_id: str, ref: str) -> tuple[str, tuple[str, ...]]:
        check_identifier(run_id, what="run_id")
        bucket, path = split_reference(ref)
        if bucket is not None:
            raise failures.foreign_bucket(run_id=run_id)
        parts = check_path(path)
        return "/".join(parts), parts

    def _open_run(self, run_id: str, *, create: bool) -> int:
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd, _ = _fs.open_dir(root, run_id, create=create, path="", run_id=run_id)
            return fd
        finally:
            os.close(root)

    def _walk(
        self,
        base: int,
        dirs: Sequence[str],
        fds: list[int],
        *,
        create: bool,
        path: str,
        run_id: str,
    ) -> tuple[int, list[int]]:
        """Descend ``dirs`` from ``base``; return the last fd and the fds of dirs that gained a
        child (to ``fsync``). Every fd opened is appended to ``fds`` for the caller to close."""
        current = base
        grew: list[int] = []
        for name in dirs:
            fd, created = _fs.open_dir(current, name, create=create, path=path, run_id=run_id)
            fds.append(fd)
            if created:
                grew.append(current)
            current = fd
        return current, grew

    # -- writes ---------------------------------------------------------------------------

    def open_write(self, run_id: str, path: str, *, versioned: bool = False) -> _LocalWriter:
        rel, parts = self._resolve(run_id, path)
        return _LocalWriter(self, run_id, rel, parts, versioned=versioned, base=())

    def put(self, run_id: str, path: str, data: bytes, *, versioned: bool = False) -> StoredObject:
        with self.open_write(run_id, path, versioned=versioned) as writer:
            writer.write(data)
        return writer.result

    def usage(self, run_id: str) -> int:
        """Bytes held by the run's regular files (staging included), walked now."""
        try:
            run = self._open_run(run_id, create=False)
        except Failure:
            return 0
        try:
            return _usage(run)
        finally:
            os.close(run)

    def _measure(self, run_id: str) -> Totals:
        """The run's published files and bytes (one walk; staging not counted)."""
        try:
            run = self._open_run(run_id, create=False)
        except Failure:
            return Totals(files=0, bytes=0)
        files = size = 0
        try:
            for _, st in _regular_files(run, skip_staging=True):
                files += 1
                size += st.st_size
        finally:
            os.close(run)
        return Totals(files=files, bytes=size)

    # -- reads ----------------------------------------------------------------------------

    def open_read(
        self,
        run_id: str,
        path: str,
        *,
        expected_sha256: str | None = None,
        expected_size: int | None = None,
    ) -> VerifyingReader:
        rel, parts = self._resolve(run_id, path)
        if expected_sha256 is not None:
            check_sha256(expected_sha256, what="expected_sha256")
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=False))
            parent, _ = self._walk(fds[0], parts[:-1], fds, create=False, path=rel, run_id=run_id)
            fd, st = _fs.open_regular(parent, parts[-1], path=rel, run_id=run_id)
        finally:
            _fs.close_all(fds)
        return VerifyingReader(
            functools.partial(os.read, fd),
            functools.partial(os.close, fd),
            size=st.st_size,
            path=rel,
            run_id=run_id,
            expected_sha256=expected_sha256,
            expected_size=expected_size,
        )

    def read_bytes(self, run_id: str, path: str, *, expected_sha256: str | None = None) -> bytes:
        with self.open_read(run_id, path, expected_sha256=expected_sha256) as reader:
            return reader.read()

    def checksum(self, run_id: str, path: str) -> StoredObject:
        with self.open_read(run_id, path) as reader:
            for _ in reader:
                pass
            return reader.stored()

    def stat(self, run_id: str, path: str) -> ObjectInfo | None:
        rel, parts = self._resolve(run_id, path)
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=False))
            parent, _ = self._walk(fds[0], parts[:-1], fds, create=False, path=rel, run_id=run_id)
            st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except Failure as exc:
            if exc.reason == "ARTIFACT_NOT_FOUND":
                return None
            raise
        finally:
            _fs.close_all(fds)
        if stat.S_ISLNK(st.st_mode):
            raise failures.symlink(rel, run_id=run_id)
        if not stat.S_ISREG(st.st_mode):
            raise failures.not_regular(rel, run_id=run_id)
        if st.st_nlink != 1:
            raise failures.hardlink(rel, run_id=run_id)
        return ObjectInfo(path=rel, size=st.st_size)

    def list(self, run_id: str, prefix: str = "") -> list[ObjectInfo]:
        check_identifier(run_id, what="run_id")
        try:
            run = self._open_run(run_id, create=False)
        except Failure as exc:
            if exc.reason == "ARTIFACT_NOT_FOUND":
                return []
            raise
        found: list[ObjectInfo] = []
        try:
            for rel, st in _regular_files(run, skip_staging=True):
                if not rel.startswith(prefix) or st.st_nlink != 1:
                    continue
                try:
                    if normal_path(rel) != rel:
                        continue  # not in NFC: not a name a store wrote; never listed
                except InvalidInput:
                    continue  # not an artifact name (placed by hand); never listed
                found.append(ObjectInfo(path=rel, size=st.st_size))
        finally:
            os.close(run)
        return sorted(found, key=lambda info: info.path)

    def first_free_path(self, run_id: str, path: str) -> str:
        rel, _ = self._resolve(run_id, path)
        for candidate in versions(rel):
            if not self._exists(run_id, candidate):
                return candidate
        raise failures.versions_exhausted(rel, run_id=run_id)

    def _exists(self, run_id: str, path: str) -> bool:
        parts = check_path(path)
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=False))
            parent, _ = self._walk(fds[0], parts[:-1], fds, create=False, path=path, run_id=run_id)
            os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except Failure as exc:
            if exc.reason == "ARTIFACT_NOT_FOUND":
                return False
            raise
        finally:
            _fs.close_all(fds)
        return True

    # -- rollback -------------------------------------------------------------------------

    def discard(self, run_id: str, objects: Sequence[StoredObject]) -> tuple[str, ...]:
        removed: list[str] = []
        for obj in objects:
            if self._discard_one(run_id, obj):
                removed.append(obj.path)
        return tuple(removed)

    def _discard_one(self, run_id: str, obj: StoredObject) -> bool:
        rel, parts = self._resolve(run_id, obj.path)
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=False))
            parent, _ = self._walk(fds[0], parts[:-1], fds, create=False, path=rel, run_id=run_id)
            fd, st = _fs.open_regular(parent, parts[-1], path=rel, run_id=run_id)
            fds.append(fd)
            digest = _hash_fd(fd)
            if digest != obj.sha256 or st.st_size != obj.size:
                return False
            now = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                return False
            os.unlink(parts[-1], dir_fd=parent)
            os.fsync(parent)
            self.usage_totals.add(run_id, -1, -st.st_size)
            return True
        except Failure:
            return False  # missing, or not something this call wrote: leave it alone
        finally:
            _fs.close_all(fds)

    # -- staging --------------------------------------------------------------------------

    def open_staging(self, run_id: str, call_id: str, attempt: int) -> StagingArea:
        check_identifier(run_id, what="run_id")
        check_identifier(call_id, what="call_id")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or not 0 <= attempt < 10**9:
            raise InvalidInput("attempt must be a small non-negative integer")
        name = f"a-{call_id}.{attempt}"
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=True))
            staging, _ = self._walk(fds[0], (STAGING,), fds, create=True, path="", run_id=run_id)
            try:
                os.mkdir(name, _fs.DIR_MODE, dir_fd=staging)
            except FileExistsError:
                raise InvalidInput(
                    "a staging area for this call attempt already exists",
                    reason="ARTIFACT_STAGING_EXISTS",
                    run_id=run_id,
                    call_id=call_id,
                ) from None
            held = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=staging)
            lock_held(held)  # until accepted or discarded (see artifacts.sweep)
            self._area_locks[(run_id, name)] = held
            os.fsync(staging)
        finally:
            _fs.close_all(fds)
        location = str(self.root / run_id / STAGING / name)
        return StagingArea(
            run_id=run_id, call_id=call_id, attempt=attempt, name=name, location=location
        )

    def _check_area(self, area: StagingArea) -> None:
        check_identifier(area.run_id, what="run_id")
        if _AREA.fullmatch(area.name) is None or area.name != f"a-{area.call_id}.{area.attempt}":
            raise InvalidInput(
                "not a staging area of this store", reason="ARTIFACT_STAGING_INVALID"
            )

    def stage(self, area: StagingArea, path: str) -> _LocalWriter:
        self._check_area(area)
        rel, parts = self._resolve(area.run_id, path)
        return _LocalWriter(
            self, area.run_id, rel, parts, versioned=False, base=(STAGING, area.name)
        )

    def discard_staging(self, area: StagingArea) -> None:
        self._check_area(area)
        self._remove_staged(area.run_id, area.name)
        self._release_area(area)

    def _release_area(self, area: StagingArea) -> None:
        held = self._area_locks.pop((area.run_id, area.name), None)
        if held is not None:
            os.close(held)

    def sweep(self) -> builtins.list[Leftover]:
        """Remove staging leftovers of dead writers (a runtime does this when it opens)."""
        return sweep_staging(self.root)

    def _remove_staged(self, run_id: str, name: str) -> None:
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=False))
            staging, _ = self._walk(fds[0], (STAGING,), fds, create=False, path="", run_id=run_id)
            shutil.rmtree(name, dir_fd=staging)  # the fd-based rmtree never follows symlinks
        except (FileNotFoundError, Failure):
            pass
        finally:
            _fs.close_all(fds)

    def accept_staging(
        self,
        area: StagingArea,
        *,
        attempt: int,
        expected: Mapping[str, str] | None = None,
        limits: StagingLimits | None = None,
    ) -> tuple[StoredObject, ...]:
        self._check_area(area)
        run_id = area.run_id
        if attempt != area.attempt:
            self.discard_staging(area)
            raise failures.attempt_stale(run_id=run_id, call_id=area.call_id)
        limits = limits or StagingLimits()
        private = f"x-{secrets.token_hex(8)}"
        fds: list[int] = []
        try:
            fds.append(self._open_run(run_id, create=False))
            staging, _ = self._walk(fds[0], (STAGING,), fds, create=False, path="", run_id=run_id)
            try:  # take the area away from the worker's path before looking inside
                _fs.rename_noreplace(staging, area.name, staging, private)
            except FileNotFoundError:
                raise failures.not_found(None, run_id=run_id) from None
            try:
                return self._accept(fds[0], staging, private, area, expected, limits)
            finally:
                self._remove_staged(run_id, private)
        finally:
            self._release_area(area)
            _fs.close_all(fds)

    def _accept(
        self,
        run: int,
        staging: int,
        private: str,
        area: StagingArea,
        expected: Mapping[str, str] | None,
        limits: StagingLimits,
    ) -> tuple[StoredObject, ...]:
        run_id = area.run_id
        fds: list[int] = []
        try:
            top, _ = _fs.open_dir(staging, private, create=False, path="", run_id=run_id)
            fds.append(top)
            staged = _scan_area(top, run_id, limits)
            check_declared([obj for obj, _ in staged], expected, run_id)
            self.usage_totals.check_add(run_id, len(staged), sum(obj.size for obj, _ in staged))
            published: list[StoredObject] = []
            try:
                for obj, raw in staged:
                    self._publish_staged(run, top, obj, raw, run_id)
                    published.append(obj)
                    self.usage_totals.add(run_id, 1, obj.size)
            except BaseException:
                self.discard(run_id, published)
                raise
            return tuple(published)
        finally:
            _fs.close_all(fds)

    def _publish_staged(
        self, run: int, top: int, obj: StoredObject, raw: tuple[str, ...], run_id: str
    ) -> None:
        """Move the staged file (its names as written, ``raw``) to its NFC path."""
        parts = check_path(obj.path)
        fds: list[int] = []
        try:
            src, _ = self._walk(top, raw[:-1], fds, create=False, path=obj.path, run_id=run_id)
            dst, grew = self._walk(run, parts[:-1], fds, create=True, path=obj.path, run_id=run_id)
            try:
                _fs.rename_noreplace(src, raw[-1], dst, parts[-1])
            except FileExistsError:
                raise failures.exists(obj.path, run_id=run_id) from None
            except OSError as exc:
                raise _fs.translate(exc, dst, parts[-1], obj.path, run_id) from None
            for fd in (dst, *grew):
                os.fsync(fd)
        finally:
            _fs.close_all(fds)


def _hash_fd(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        h.update(chunk)
    return _digest(h)


def _regular_files(top: int, *, skip_staging: bool) -> Iterator[tuple[str, os.stat_result]]:
    """(run-relative path, lstat) of every regular file under ``top``.

    Never follows a link and never stats through one: entries are classified with
    ``AT_SYMLINK_NOFOLLOW`` and directories are entered with ``O_NOFOLLOW | O_DIRECTORY``
    relative to their parent, so a directory swapped for a symlink mid-walk is skipped.
    """

    def walk(fd: int, prefix: str, depth: int) -> Iterator[tuple[str, os.stat_result]]:
        with os.scandir(fd) as entries:
            names = [entry.name for entry in entries]
        for name in names:
            if skip_staging and not prefix and name == STAGING:
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield prefix + name, st
            elif stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                try:
                    sub = os.open(name, _fs.DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # replaced (by a symlink, say) since it was classified
                try:
                    yield from walk(sub, prefix + name + "/", depth + 1)
                finally:
                    os.close(sub)

    yield from walk(top, "", 0)


def _usage(run: int) -> int:
    return sum(st.st_size for _, st in _regular_files(run, skip_staging=False))


def _scan_area(
    top: int, run_id: str, limits: StagingLimits
) -> list[tuple[StoredObject, tuple[str, ...]]]:
    """Hash every staged file; refuse links, non-regular files, bad names and limits.

    Each file comes with its path as written (the object's path is its NFC form)."""
    staged: list[tuple[StoredObject, tuple[str, ...]]] = []
    tally = Tally(limits, run_id)

    def visit(fd: int, prefix: str) -> None:
        with os.scandir(fd) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            rel = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            nfc = normal_path(rel)  # also bounds the depth of the walk
            if stat.S_ISDIR(st.st_mode):
                sub, _ = _fs.open_dir(fd, name, create=False, path=rel, run_id=run_id)
                try:
                    visit(sub, rel + "/")
                finally:
                    os.close(sub)
                continue
            file_fd, fst = _fs.open_regular(fd, name, path=rel, run_id=run_id)
            try:
                tally.add(rel, fst.st_size)
                digest = _hash_fd(file_fd)
            finally:
                os.close(file_fd)
            staged.append(
                (StoredObject(path=nfc, sha256=digest, size=fst.st_size), tuple(rel.split("/")))
            )

    visit(top, "")
    return staged


class _LocalWriter:
    """A create-only write into a private temporary file, published by ``close``."""

    def __init__(
        self,
        store: LocalArtifactStore,
        run_id: str,
        path: str,
        parts: tuple[str, ...],
        *,
        versioned: bool,
        base: tuple[str, ...],
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._path = path
        self._parts = parts
        self._versioned = versioned
        self._base = base
        self._hash = hashlib.sha256()
        self._size = 0
        self._buffer = bytearray()
        self._result: StoredObject | None = None
        self._done = False
        self._fds: list[int] = []
        self._tmp = f"w-{secrets.token_hex(8)}"
        try:
            self._run = store._open_run(run_id, create=True)
            self._fds.append(self._run)
            self._staging, _ = store._walk(
                self._run, (STAGING,), self._fds, create=True, path=path, run_id=run_id
            )
            self._fd = os.open(self._tmp, _fs.CREATE_FLAGS, _fs.FILE_MODE, dir_fd=self._staging)
            self._fds.append(self._fd)
            lock_held(self._fd)  # held until published or removed (see artifacts.sweep)
            usage = store.usage_totals
            self._used = usage.totals(run_id).bytes if usage.enabled and not base else 0
        except BaseException:
            self._cleanup()
            raise

    def __enter__(self) -> _LocalWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._done:
            self.close()

    @property
    def result(self) -> StoredObject:
        if self._result is None:
            raise InvalidInput("the artifact was not published", reason="ARTIFACT_NOT_PUBLISHED")
        return self._result

    def write(self, data: bytes | bytearray | memoryview, /) -> int:
        if self._done:
            raise InvalidInput("the artifact writer is closed", reason="ARTIFACT_WRITER_CLOSED")
        n = len(memoryview(data).cast("B"))
        store = self._store
        try:
            if store.max_file_bytes is not None and self._size + n > store.max_file_bytes:
                raise failures.too_large(
                    "file size", store.max_file_bytes, path=self._path, run_id=self._run_id
                )
            store.usage_totals.check_bytes(self._run_id, self._used, self._size + n)
            self._hash.update(data)
            self._size += n
            if n >= _BUFFER:
                self._flush()
                _fs.write_all(self._fd, data)
            else:
                self._buffer += data
                if len(self._buffer) >= _BUFFER:
                    self._flush()
        except OSError as exc:  # the disk is full or failing
            self.abort()
            raise _fs.io_failed(exc, self._path, self._run_id) from None
        except BaseException:
            self.abort()
            raise
        return n

    def _flush(self) -> None:
        if self._buffer:
            _fs.write_all(self._fd, self._buffer)
            self._buffer.clear()

    def close(self) -> StoredObject:
        if self._result is not None:
            return self._result
        if self._done:
            raise InvalidInput("the artifact writer was aborted", reason="ARTIFACT_WRITER_CLOSED")
        try:
            self._flush()
            os.fsync(self._fd)
            result = self._publish()
        except OSError as exc:  # the disk is full or failing
            self.abort()
            raise _fs.io_failed(exc, self._path, self._run_id) from None
        except BaseException:
            self.abort()
            raise
        self._result = result
        self._done = True
        self._cleanup()
        return result

    def _publish(self) -> StoredObject:
        run_id, path = self._run_id, self._path
        dirs = (*self._base, *self._parts[:-1])
        parent, grew = self._store._walk(
            self._run, dirs, self._fds, create=True, path=path, run_id=run_id
        )
        usage = self._store.usage_totals
        if not self._base:  # a staging area's files count when the area is accepted
            usage.check_add(run_id, 1, self._size)
        candidates = versions(path) if self._versioned else iter((path,))
        for candidate in candidates:
            name = candidate.rsplit("/", 1)[-1]
            try:
                _fs.rename_noreplace(self._staging, self._tmp, parent, name)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _fs.translate(exc, parent, name, path, run_id) from None
            if not self._base:
                usage.add(run_id, 1, self._size)
            for fd in (parent, *grew):
                os.fsync(fd)
            self._tmp = ""
            return StoredObject(path=candidate, sha256=_digest(self._hash), size=self._size)
        if self._versioned:
            raise failures.versions_exhausted(path, run_id=run_id)
        raise failures.exists(path, run_id=run_id)

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp and hasattr(self, "_staging"):
            with contextlib.suppress(OSError):
                os.unlink(self._tmp, dir_fd=self._staging)
            self._tmp = ""
        _fs.close_all(self._fds)
