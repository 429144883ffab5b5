"""``charter artifacts put`` (the real executable, local and ``--server``), ``--input
TYPE=FILE`` of a catalog run and ``charter tasks handoff --file``, given a path that is not
a regular file.

Before: a FIFO blocked the command forever on its ``open`` (nothing writes to it), and
``/dev/zero`` or ``/dev/urandom`` were read until the upload limit (``--server``: into memory,
without end); a directory was typer's usage error. Now each is refused before anything is
opened for reading — ``FILE_NOT_REGULAR`` naming the path and what it is, exit 1 — and a path
swapped for a FIFO between the check and the open is refused by the descriptor's ``fstat``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import charter
from charter.artifacts import user_file
from charter.artifacts.user_file import open_user_file
from charter.errors import InvalidInput
from tests.artifacts_export.conftest import new_run
from tests.server._harness import Project, ThreadServer

ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")},
    "PYTHONPATH": str(Path(charter.__file__).parents[1]),
}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose paths fit a Unix socket's 108 bytes."""
    with tempfile.TemporaryDirectory(dir="/tmp") as made:
        yield Path(made)


def _fifo(where: Path) -> Path:
    os.mkfifo(where / "pipe")
    return where / "pipe"


def _directory(where: Path) -> Path:
    (where / "folder").mkdir()
    return where / "folder"


def _socket(where: Path) -> Path:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(where / "sock"))
    return where / "sock"  # the bound socket's file stays until the directory goes


KINDS: list[tuple[str, Callable[[Path], Path], str]] = [
    ("fifo", _fifo, "a FIFO (named pipe)"),
    ("directory", _directory, "a directory"),
    ("socket", _socket, "a socket"),
    ("dev-zero", lambda _: Path("/dev/zero"), "a character device"),
    ("dev-urandom", lambda _: Path("/dev/urandom"), "a character device"),
]


def _charter(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "charter", *args, "--json"],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"charter {' '.join(args)} still ran after 10 s (reading forever)")


def _refused(done: subprocess.CompletedProcess[str], path: Path, kind: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["reason"] == "FILE_NOT_REGULAR", body
    assert f"{str(path)!r} is {kind}, not a regular file" in body["error"], body


@pytest.mark.parametrize(("make", "kind"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS])
def test_put_refuses_what_is_not_a_regular_file(
    project: Project, short_dir: Path, make: Callable[[Path], Path], kind: str
) -> None:
    run_id, _ = new_run(project.root)
    path = make(short_dir)
    done = _charter("artifacts", "put", run_id, str(path), "-p", str(project.root), "--as", "app")
    _refused(done, path, kind)
    listed = _charter("artifacts", "ls", run_id, "-p", str(project.root), "--as", "app")
    assert json.loads(listed.stdout) == []  # nothing registered


@pytest.mark.parametrize(("make", "kind"), [KINDS[0][1:], KINDS[3][1:]], ids=["fifo", "dev-zero"])
def test_put_over_the_api_refuses_it_too(
    served: Project,
    server: ThreadServer,
    short_dir: Path,
    make: Callable[[Path], Path],
    kind: str,
) -> None:
    run_id, _ = new_run(served.root)
    path = make(short_dir)
    ENV["CHARTER_API_KEY"] = served.keys["app"]
    try:
        done = _charter("artifacts", "put", run_id, str(path), "--server", server.url)
    finally:
        del ENV["CHARTER_API_KEY"]
    _refused(done, path, kind)


def test_a_run_input_that_is_a_fifo_is_refused(short_dir: Path) -> None:
    """``charter workflow run --input TYPE=FILE`` (and ``--server``) read the file with
    :func:`charter.workflows.entry.inputs_from_options`: a FIFO was "no such file" when seen
    before the read, and blocked forever when swapped in; now it is named for what it is."""
    fifo = _fifo(short_dir)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from charter.errors import InvalidInput\n"
        "from charter.workflows.entry import inputs_from_options\n"
        "try:\n"
        "    inputs_from_options(['doc=pipe'], base=Path(sys.argv[1]))\n"
        "except InvalidInput as exc:\n"
        "    print(exc.reason, exc.message)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(short_dir)],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reading the FIFO still blocked after 10 s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("FILE_NOT_REGULAR "), done.stdout
    assert f"{str(fifo)!r} is a FIFO (named pipe), not a regular file" in done.stdout


def test_a_path_swapped_for_a_fifo_after_the_check_is_refused(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the path is a regular file when ``stat``-ed, a FIFO when opened. The open
    does not block (``O_NONBLOCK``) and the descriptor's ``fstat`` refuses it."""
    path = short_dir / "swapped"
    path.write_bytes(b"regular")
    real_open = os.open

    def swapping_open(name: object, flags: int, *args: object) -> int:
        if Path(str(name)) == path:
            path.unlink()
            os.mkfifo(path)
        return real_open(name, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(user_file.os, "open", swapping_open)
    with pytest.raises(InvalidInput) as refused:
        open_user_file(path, what="FILE")
    assert refused.value.reason == "FILE_NOT_REGULAR"
    assert "is a FIFO (named pipe)" in refused.value.message


@pytest.mark.parametrize(("make", "kind"), [KINDS[0][1:], KINDS[3][1:]], ids=["fifo", "dev-zero"])
def test_a_handoff_file_that_is_not_a_regular_file_is_refused(
    short_dir: Path, make: Callable[[Path], Path], kind: str
) -> None:
    """``charter tasks handoff --file PATH`` read the path as text: a FIFO blocked forever, and
    ``/dev/zero`` was read without end. Refused before the run is even looked up."""
    path = make(short_dir)
    done = _charter("tasks", "handoff", "run-x", "t1", "--file", str(path), "--as", "app")
    _refused(done, path, kind)
