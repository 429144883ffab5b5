"""File system attacks on the local store: links, FIFOs, swapped directories, hostile staging.

Each test plants something in a run directory by hand (as a compromised tool or worker could)
and checks that the store refuses it with its reason and that nothing outside the run directory
is created, changed or read.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.records import StoredObject
from charter.errors import Failure

RUN = "run-x"
SECRET = b"outside secret\n"


@dataclass
class Scene:
    store: LocalArtifactStore
    run: Path
    outside: Path

    def outside_state(self) -> dict[str, tuple[bytes, int, int]]:
        state = {}
        for path in sorted(self.outside.rglob("*")):
            st = path.lstat()
            data = path.read_bytes() if path.is_file() else b""
            state[path.relative_to(self.outside).as_posix()] = (data, st.st_size, st.st_mtime_ns)
        return state


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    store = LocalArtifactStore(tmp_path / "store")
    store.put(RUN, "seed.txt", b"seed")
    s = Scene(store=store, run=tmp_path / "store" / RUN, outside=outside)
    before = s.outside_state()
    yield s
    assert s.outside_state() == before, "something outside the run directory changed"


def reason(exc: pytest.ExceptionInfo[Failure]) -> str:
    return exc.value.reason


def test_symlink_to_a_directory_outside(scene: Scene) -> None:
    (scene.run / "link").symlink_to(scene.outside, target_is_directory=True)
    for attempt in (
        lambda: scene.store.put(RUN, "link/new.txt", b"x"),
        lambda: scene.store.put(RUN, "link/deeper/new.txt", b"x"),
        lambda: scene.store.read_bytes(RUN, "link/secret.txt"),
        lambda: scene.store.stat(RUN, "link/secret.txt"),
        lambda: scene.store.checksum(RUN, "link/secret.txt"),
        lambda: scene.store.first_free_path(RUN, "link/secret.txt"),
    ):
        with pytest.raises(Failure) as info:
            attempt()
        assert reason(info) == "ARTIFACT_SYMLINK"
    assert [i.path for i in scene.store.list(RUN)] == ["seed.txt"]


def test_symlinked_parent_for_a_new_file(scene: Scene) -> None:
    (scene.run / "data" / "real").mkdir(parents=True)
    (scene.run / "data" / "sym").symlink_to(scene.outside, target_is_directory=True)
    with pytest.raises(Failure) as info:
        scene.store.put(RUN, "data/sym/sub/new.txt", b"x")
    assert reason(info) == "ARTIFACT_SYMLINK"
    assert scene.store.put(RUN, "data/real/new.txt", b"ok").path == "data/real/new.txt"
    assert not (scene.outside / "sub").exists()


def test_symlinked_run_directory(scene: Scene) -> None:
    (scene.store.root / "run-evil").symlink_to(scene.outside, target_is_directory=True)
    with pytest.raises(Failure) as info:
        scene.store.put("run-evil", "new.txt", b"x")
    assert reason(info) == "ARTIFACT_SYMLINK"
    with pytest.raises(Failure) as info:
        scene.store.read_bytes("run-evil", "secret.txt")
    assert reason(info) == "ARTIFACT_SYMLINK"


def test_symlink_as_the_file_itself(scene: Scene) -> None:
    (scene.run / "f.txt").symlink_to(scene.outside / "secret.txt")
    (scene.run / "dangling.txt").symlink_to(scene.outside / "created-through-link.txt")
    with pytest.raises(Failure) as info:
        scene.store.read_bytes(RUN, "f.txt")
    assert reason(info) == "ARTIFACT_SYMLINK"
    for name in ("f.txt", "dangling.txt"):
        with pytest.raises(Failure) as info:
            scene.store.put(RUN, name, b"overwrite?")
        assert reason(info) == "ARTIFACT_EXISTS"
    digest = scene.store.put(RUN, "probe.txt", SECRET).sha256
    assert scene.store.discard(RUN, [_obj("f.txt", digest, len(SECRET))]) == ()
    assert (scene.run / "f.txt").is_symlink()


def test_hard_link_to_an_outside_file(scene: Scene) -> None:
    os.link(scene.outside / "secret.txt", scene.run / "h.txt")
    with pytest.raises(Failure) as info:
        scene.store.read_bytes(RUN, "h.txt")
    assert reason(info) == "ARTIFACT_HARDLINK"
    with pytest.raises(Failure) as info:
        scene.store.stat(RUN, "h.txt")
    assert reason(info) == "ARTIFACT_HARDLINK"
    with pytest.raises(Failure) as info:
        scene.store.put(RUN, "h.txt", b"truncate me")
    assert reason(info) == "ARTIFACT_EXISTS"
    digest = scene.store.put(RUN, "probe.txt", SECRET).sha256
    assert scene.store.discard(RUN, [_obj("h.txt", digest, len(SECRET))]) == ()
    assert "h.txt" not in [i.path for i in scene.store.list(RUN)]
    assert (scene.outside / "secret.txt").stat().st_nlink == 2


def _in_thread(fn: Callable[[], object]) -> BaseException | None:
    """Run ``fn`` in a thread; fail the test (instead of hanging) if it blocks."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the store blocked on a FIFO"
    return outcome[0]


def test_fifo_is_refused_without_blocking(scene: Scene) -> None:
    os.mkfifo(scene.run / "pipe")
    for fn in (
        lambda: scene.store.read_bytes(RUN, "pipe"),
        lambda: scene.store.checksum(RUN, "pipe"),
        lambda: scene.store.stat(RUN, "pipe"),
    ):
        exc = _in_thread(fn)
        assert isinstance(exc, Failure)
        assert exc.reason == "ARTIFACT_NOT_REGULAR"
    exc = _in_thread(lambda: scene.store.put(RUN, "pipe", b"x"))
    assert isinstance(exc, Failure)
    assert exc.reason == "ARTIFACT_EXISTS"
    assert _in_thread(lambda: scene.store.list(RUN)) is None


def test_directories_and_files_in_the_wrong_place(scene: Scene) -> None:
    (scene.run / "dir").mkdir()
    with pytest.raises(Failure) as info:
        scene.store.read_bytes(RUN, "dir")
    assert reason(info) == "ARTIFACT_NOT_REGULAR"
    with pytest.raises(Failure) as info:
        scene.store.put(RUN, "dir", b"x")
    assert reason(info) == "ARTIFACT_EXISTS"
    with pytest.raises(Failure) as info:
        scene.store.put(RUN, "seed.txt/child.txt", b"x")
    assert reason(info) == "ARTIFACT_NOT_DIRECTORY"


def test_failed_writes_leave_no_temporary_files(scene: Scene) -> None:
    store = LocalArtifactStore(scene.store.root, quota_bytes=1000)
    writer = store.open_write(RUN, "big.bin")
    writer.write(b"x" * 600)
    with pytest.raises(Failure) as info:
        writer.write(b"x" * 600)
    assert reason(info) == "ARTIFACT_QUOTA_EXCEEDED"
    writer = store.open_write(RUN, "seed.txt")
    writer.write(b"collides on publish")
    with pytest.raises(Failure) as info:
        writer.close()
    assert reason(info) == "ARTIFACT_EXISTS"
    assert os.listdir(scene.run / ".staging") == []
    assert sorted(os.listdir(scene.run)) == [".staging", "seed.txt"]


def test_published_files_are_private_to_their_run(scene: Scene) -> None:
    stored = scene.store.put(RUN, "a/b.txt", b"data")
    st = (scene.run / "a" / "b.txt").lstat()
    assert st.st_nlink == 1
    assert oct(st.st_mode & 0o777) == oct(0o644 & ~_umask())
    assert stored.size == 4


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        (
            lambda area, outside: (area / "s.txt").symlink_to(outside / "secret.txt"),
            "ARTIFACT_SYMLINK",
        ),
        (
            lambda area, outside: (area / "dir").symlink_to(outside, target_is_directory=True),
            "ARTIFACT_SYMLINK",
        ),
        (
            lambda area, outside: os.link(outside / "secret.txt", area / "h.txt"),
            "ARTIFACT_HARDLINK",
        ),
        (lambda area, outside: os.mkfifo(area / "fifo"), "ARTIFACT_NOT_REGULAR"),
        (
            lambda area, outside: (area / "manifest.json").write_bytes(b"{}"),
            "ARTIFACT_PATH_RESERVED",
        ),
        (
            lambda area, outside: (area / "bad\nname").write_bytes(b"x"),
            "ARTIFACT_PATH_CONTROL_CHAR",
        ),
        (lambda area, outside: (area / "a\\b").write_bytes(b"x"), "ARTIFACT_PATH_BACKSLASH"),
        (lambda area, outside: (area / "nul.txt").write_bytes(b"x"), "ARTIFACT_PATH_DEVICE_NAME"),
        (lambda area, outside: (area / "r.txt:s").write_bytes(b"x"), "ARTIFACT_PATH_COLON"),
        (
            lambda area, outside: (area / "r.txt.").write_bytes(b"x"),
            "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE",
        ),
        (
            lambda area, outside: (
                (area / "cafe\u0301.txt").write_bytes(b"x"),
                (area / "caf\u00e9.txt").write_bytes(b"y"),
            ),
            "ARTIFACT_EXISTS",
        ),
    ],
)
def test_hostile_staging_is_refused_and_discarded(
    scene: Scene, plant: Callable[[Path, Path], object], expected: str
) -> None:
    area = scene.store.open_staging(RUN, "call-w", 3)
    staged = Path(area.location)
    (staged / "good.txt").write_bytes(b"good")
    plant(staged, scene.outside)
    exc = _in_thread(lambda: scene.store.accept_staging(area, attempt=3))
    assert isinstance(exc, Failure)
    assert exc.reason == expected
    assert [i.path for i in scene.store.list(RUN)] == ["seed.txt"]
    assert os.listdir(scene.run / ".staging") == []


def test_worker_written_staging_is_accepted(scene: Scene) -> None:
    area = scene.store.open_staging(RUN, "call-w", 1)
    staged = Path(area.location)
    (staged / "out").mkdir()
    (staged / "out" / "r.csv").write_bytes(b"a\n")
    (staged / "out" / "empty-dir").mkdir()
    accepted = scene.store.accept_staging(area, attempt=1)
    assert [o.path for o in accepted] == ["out/r.csv"]
    assert scene.store.read_bytes(RUN, "out/r.csv", expected_sha256=accepted[0].sha256) == b"a\n"
    assert not staged.exists()


def test_worker_written_nfd_names_are_published_in_nfc(scene: Scene) -> None:
    area = scene.store.open_staging(RUN, "call-w", 1)
    staged = Path(area.location)
    (staged / "cafe\u0301").mkdir()
    (staged / "cafe\u0301" / "re\u0301sume\u0301.txt").write_bytes(b"r")
    accepted = scene.store.accept_staging(area, attempt=1)
    assert [o.path for o in accepted] == ["caf\u00e9/r\u00e9sum\u00e9.txt"]
    assert (scene.run / "caf\u00e9" / "r\u00e9sum\u00e9.txt").read_bytes() == b"r"
    assert not (scene.run / "cafe\u0301").exists()


_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2


def _exchange(directory: Path, a: str, b: str) -> None:
    """Atomically swap two names (renameat2 RENAME_EXCHANGE): ``a`` never goes missing."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _libc.renameat2(fd, a.encode(), fd, b.encode(), _RENAME_EXCHANGE) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


def _attempt(op: Callable[[], object], counts: dict[str, int]) -> None:
    try:
        op()
    except Failure as exc:
        counts[exc.reason] = counts.get(exc.reason, 0) + 1
    else:
        counts["ok"] = counts.get("ok", 0) + 1


def test_race_swapping_a_directory_and_a_symlink(scene: Scene) -> None:
    """A thread keeps exchanging ``d`` (a real directory) with a symlink to the outside while
    writes, reads, stats and listings go on: nothing outside is created, changed or read."""
    real = scene.run / "d"
    real.mkdir()
    (real / "secret.txt").write_bytes(b"inside")
    (real / "sub").mkdir()
    (scene.run / "d-link").symlink_to(scene.outside, target_is_directory=True)
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        while not stop.is_set():
            _exchange(scene.run, "d", "d-link")
            swaps += 1
            time.sleep(0)

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    counts: dict[str, int] = {}
    written: list[str] = []
    reads: list[bytes] = []
    deadline = time.monotonic() + 3.0
    try:
        for i in itertools.count():
            if time.monotonic() > deadline:
                break
            ops: list[Callable[[], object]] = [
                functools.partial(
                    lambda n: written.append(scene.store.put(RUN, f"d/f{n}.txt", b"w").path), i
                ),
                functools.partial(
                    lambda n: written.append(scene.store.put(RUN, f"d/sub/g{n}.txt", b"w").path), i
                ),
                lambda: written.append(
                    scene.store.put(RUN, "d/secret.txt", b"v", versioned=True).path
                ),
                lambda: reads.append(scene.store.read_bytes(RUN, "d/secret.txt")),
                lambda: scene.store.stat(RUN, "d/secret.txt"),
                lambda: scene.store.list(RUN, "d/"),
            ]
            for op in ops:
                _attempt(op, counts)
                time.sleep(0)
    finally:
        stop.set()
        thread.join()
    if (scene.run / "d").is_symlink():
        _exchange(scene.run, "d", "d-link")
    assert swaps > 0
    assert counts.get("ok", 0) > 0, counts
    assert counts.get("ARTIFACT_SYMLINK", 0) > 0, counts
    assert set(counts) <= {"ok", "ARTIFACT_SYMLINK"}, counts
    assert set(reads) == {b"inside"}
    run_root = scene.run.resolve()
    for path in written:
        target = Path(os.path.realpath(scene.run / path))
        assert target.is_relative_to(run_root)
        assert target.read_bytes() in {b"w", b"v"}
    # The scene fixture checks that nothing under the outside directory was created or changed.


def _read_never_outside(data: bytes) -> None:
    assert data == b"inside", "read a file outside the run directory"


def _obj(path: str, sha256: str, size: int) -> StoredObject:
    return StoredObject(path=path, sha256=sha256, size=size)
