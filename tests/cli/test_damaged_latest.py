"""A damaged ``.charter/builds/LATEST`` pointer is refused in one line naming the file, what
is wrong with it and how to recover. Garbage bytes answered 'internal error
(UnicodeDecodeError)', an empty pointer 'no Build at .charter/builds/.json', text that is not
a digest was read as a file name ('no Build at .charter/builds/hello world.json', and
``../../x`` reached outside the builds directory), a directory answered 'Is a directory'
(and ``charter build`` could not replace it)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

import charter
from tests.cli.test_first_hour import charter as charter_cli
from tests.conftest import copy_demo

MISSING = "sha256:" + "0" * 64


def damage(latest: Path, kind: str) -> str:
    """Damage the pointer; answer what the error must say is wrong with it."""
    if kind == "directory":
        latest.unlink()
        latest.mkdir()
        return "it is a directory, not a file; remove it and run `charter build`"
    text = {
        "binary": b"\x00\xff\xfegarbage\x01",
        "empty": b"",
        "blank": b" \n",
        "words": b"hello world\n",
        "traversal": b"../../charter.yaml\n",
        "missing": MISSING.encode() + b"\n",
    }[kind]
    latest.write_bytes(text)
    return {
        "binary": "it is not UTF-8 text",
        "empty": "it is empty",
        "blank": "it is empty",
        "words": "it does not hold a Build digest",
        "traversal": "it does not hold a Build digest",
        "missing": f"it names Build {MISSING}, which is not in",
    }[kind]


KINDS = ["binary", "empty", "blank", "words", "traversal", "missing", "directory"]


@pytest.fixture(scope="module")
def built(demo_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = copy_demo(demo_template, tmp_path_factory.mktemp("built"))
    done = charter_cli("build", cwd=demo)
    assert done.returncode == 0, done.stderr
    return demo


@pytest.fixture
def demo(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "demo", symlinks=True))


def assert_refused(done: subprocess.CompletedProcess[str], what: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("error: .charter/builds/LATEST is damaged: "), line
    assert what in line, line
    assert "charter build" in line, line
    assert "Traceback" not in done.stderr
    assert "internal error" not in done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_latest_refuses_a_damaged_pointer(demo: Path, kind: str) -> None:
    what = damage(demo / ".charter" / "builds" / "LATEST", kind)
    assert_refused(charter_cli("inspect", "latest", cwd=demo), what)


@pytest.mark.parametrize("kind", ["binary", "words", "directory"])
def test_promote_and_replay_refuse_a_damaged_pointer(demo: Path, kind: str) -> None:
    what = damage(demo / ".charter" / "builds" / "LATEST", kind)
    assert_refused(charter_cli("promote", "latest", "--env", "prod", cwd=demo), what)
    replayed = charter_cli("runs", "replay", "some-run", "--build", "latest", cwd=demo)
    assert_refused(replayed, what)
    checked = charter_cli("check", "--build", "latest", cwd=demo)
    assert_refused(checked, what)


def test_build_replaces_a_damaged_pointer(demo: Path) -> None:
    latest = demo / ".charter" / "builds" / "LATEST"
    digest = latest.read_text().strip()
    damage(latest, "binary")
    assert charter_cli("build", cwd=demo).returncode == 0
    assert latest.read_text().strip() == digest
    assert charter_cli("inspect", "latest", cwd=demo).returncode == 0


def test_build_over_a_directory_pointer_says_to_remove_it(demo: Path) -> None:
    latest = demo / ".charter" / "builds" / "LATEST"
    what = damage(latest, "directory")
    assert_refused(charter_cli("build", cwd=demo), what)
    latest.rmdir()
    assert charter_cli("build", cwd=demo).returncode == 0
    assert latest.is_file()


@pytest.mark.parametrize("kind", KINDS)
def test_open_with_build_latest_refuses_a_damaged_pointer(demo: Path, kind: str) -> None:
    latest = demo / ".charter" / "builds" / "LATEST"
    what = damage(latest, kind)

    async def go() -> None:
        async with charter.open(demo, build="latest"):
            pass  # pragma: no cover - refused before it opens

    with pytest.raises(charter.UserError) as raised:
        asyncio.run(go())
    message = str(raised.value)
    assert message.startswith(f"{latest} is damaged: "), message
    assert what in message
    assert "charter build" in message
    assert not (demo / ".charter" / "charter.db").exists()  # refused before the store opened
