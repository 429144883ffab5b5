"""Path rules: a table of hostile names, accepted names, versions, and a confinement property."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.names import (
    check_path,
    normal_path,
    split_extension,
    split_reference,
    versions,
)
from charter.errors import Failure, InvalidInput

HOSTILE: list[tuple[str, str]] = [
    # empty
    ("", "ARTIFACT_PATH_EMPTY"),
    # absolute, drive and UNC forms
    ("/etc/passwd", "ARTIFACT_PATH_ABSOLUTE"),
    ("//etc/passwd", "ARTIFACT_PATH_ABSOLUTE"),
    ("C:\\Windows\\system32\\x.dll", "ARTIFACT_PATH_ABSOLUTE"),
    ("C:\\\\x", "ARTIFACT_PATH_ABSOLUTE"),
    ("c:/x.txt", "ARTIFACT_PATH_ABSOLUTE"),
    ("C:x.txt", "ARTIFACT_PATH_ABSOLUTE"),
    ("\\\\server\\share\\x", "ARTIFACT_PATH_ABSOLUTE"),
    # traversal
    ("..", "ARTIFACT_PATH_TRAVERSAL"),
    ("../x.txt", "ARTIFACT_PATH_TRAVERSAL"),
    ("a/../../x.txt", "ARTIFACT_PATH_TRAVERSAL"),
    ("a/..", "ARTIFACT_PATH_TRAVERSAL"),
    (".", "ARTIFACT_PATH_TRAVERSAL"),
    ("./x.txt", "ARTIFACT_PATH_TRAVERSAL"),
    ("a/./b.txt", "ARTIFACT_PATH_TRAVERSAL"),
    # backslashes
    ("..\\x.txt", "ARTIFACT_PATH_BACKSLASH"),
    ("a\\b.txt", "ARTIFACT_PATH_BACKSLASH"),
    # encoded traversal
    ("%2e%2e/x.txt", "ARTIFACT_PATH_ENCODED"),
    ("%2E%2E%2Fx.txt", "ARTIFACT_PATH_ENCODED"),
    ("..%2fx.txt", "ARTIFACT_PATH_ENCODED"),
    ("..%5cx.txt", "ARTIFACT_PATH_ENCODED"),
    ("%252e%252e/x.txt", "ARTIFACT_PATH_ENCODED"),
    ("..%c0%afx.txt", "ARTIFACT_PATH_ENCODED"),
    ("a%00b.txt", "ARTIFACT_PATH_ENCODED"),
    ("%u002e%u002e/x.txt", "ARTIFACT_PATH_ENCODED"),
    ("&#46;&#46;/x.txt", "ARTIFACT_PATH_ENCODED"),
    ("&#x2e;&#x2e;&#x2f;x.txt", "ARTIFACT_PATH_ENCODED"),
    ("a\ud800b.txt", "ARTIFACT_PATH_ENCODED"),
    # NUL, control and invisible format characters
    ("a\x00b.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("../\x00", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a\nb.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a\tb.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a\x7fb.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a\x85b.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("evil\u202etxt.exe", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a\u200bb.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a\u2028b.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("\ufeffa.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    # empty components
    ("a//b.txt", "ARTIFACT_PATH_EMPTY_COMPONENT"),
    ("a/", "ARTIFACT_PATH_EMPTY_COMPONENT"),
    # Unicode look-alike dots, slashes, backslashes and percent signs
    ("\u2024\u2024/x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("\u2025/x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("\u2026", "ARTIFACT_PATH_LOOKALIKE"),
    ("\uff0e\uff0e/x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("\ufe52\ufe52/x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\u2215x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\uff0fx.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\u2044x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\u29f8x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\ufe68x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\uff3cx.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("..\u2216x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("\uff052e\uff052e/x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    # overlong
    ("x" * 256, "ARTIFACT_NAME_TOO_LONG"),
    ("é" * 128, "ARTIFACT_NAME_TOO_LONG"),
    ("/".join(["x" * 200] * 6), "ARTIFACT_PATH_TOO_LONG"),
    ("/".join(["a"] * 33), "ARTIFACT_PATH_TOO_DEEP"),
    # the run's own files
    ("manifest.json", "ARTIFACT_PATH_RESERVED"),
    ("MANIFEST.JSON", "ARTIFACT_PATH_RESERVED"),
    ("events", "ARTIFACT_PATH_RESERVED"),
    ("events/00000001.jsonl", "ARTIFACT_PATH_RESERVED"),
    ("Events/new.jsonl", "ARTIFACT_PATH_RESERVED"),
    ("artifacts/index.json", "ARTIFACT_PATH_RESERVED"),
    ("Artifacts/Index.JSON", "ARTIFACT_PATH_RESERVED"),
    (".staging", "ARTIFACT_PATH_RESERVED"),
    (".staging/w-0123", "ARTIFACT_PATH_RESERVED"),
    (".STAGING/a-call.1/x", "ARTIFACT_PATH_RESERVED"),
    # not portable: Windows device names with or without extensions, in any case
    ("CON", "ARTIFACT_PATH_DEVICE_NAME"),
    ("nul.txt", "ARTIFACT_PATH_DEVICE_NAME"),
    ("COM1", "ARTIFACT_PATH_DEVICE_NAME"),
    ("aux.json", "ARTIFACT_PATH_DEVICE_NAME"),
    ("LPT1.log", "ARTIFACT_PATH_DEVICE_NAME"),
    ("prn", "ARTIFACT_PATH_DEVICE_NAME"),
    ("com9.tar.gz", "ARTIFACT_PATH_DEVICE_NAME"),
    ("lpt0", "ARTIFACT_PATH_DEVICE_NAME"),
    ("COM\u00b9.txt", "ARTIFACT_PATH_DEVICE_NAME"),
    ("CONIN$", "ARTIFACT_PATH_DEVICE_NAME"),
    ("conout$.log", "ARTIFACT_PATH_DEVICE_NAME"),
    ("NUL .txt", "ARTIFACT_PATH_DEVICE_NAME"),
    ("reports/aux/x.txt", "ARTIFACT_PATH_DEVICE_NAME"),
    # not portable: ':' anywhere (NTFS alternate data streams)
    ("report.txt:hidden", "ARTIFACT_PATH_COLON"),
    ("report.txt::$DATA", "ARTIFACT_PATH_COLON"),
    ("ab:c.txt", "ARTIFACT_PATH_COLON"),
    ("a/b:", "ARTIFACT_PATH_COLON"),
    # not portable: blank components, trailing dots and spaces
    (" ", "ARTIFACT_PATH_BLANK_COMPONENT"),
    ("a/ /b", "ARTIFACT_PATH_BLANK_COMPONENT"),
    ("\u3000/x.txt", "ARTIFACT_PATH_BLANK_COMPONENT"),
    ("...", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("a..", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("report.txt.", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("report.txt ", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("dir /x.txt", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("x.txt\u00a0", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
]

ACCEPTED = [
    "[...slug].ts",
    "a..b.txt",
    "..a",
    ".env",
    "x" * 255,
    "é" * 127,
    "/".join(["a"] * 32),
    "events.jsonl",
    "my-events/1.jsonl",
    "sub/manifest.json",
    "sub/.staging/x",
    "artifacts/other.json",
    "100%.txt",
    "50%off.csv",
    "a b.txt",
    "日本語/ファイル.txt",
    "naïve café.md",
    "~/x",
    " leading.txt",
    "console.txt",
    "com10.txt",
    "lpt.txt",
    "icon.png",
    "nul_.txt",
    "l\u00b7l.txt",
]


@pytest.mark.parametrize(("path", "reason"), HOSTILE, ids=[repr(p)[:40] for p, _ in HOSTILE])
def test_hostile_names_are_refused_with_their_reason(path: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_path(path)
    assert info.value.reason == reason
    assert len(path) < 4 or path not in str(info.value)  # messages never echo the path


@pytest.mark.parametrize("path", ACCEPTED, ids=[repr(p)[:40] for p in ACCEPTED])
def test_legitimate_names_are_accepted(path: str) -> None:
    assert check_path(path) == tuple(path.split("/"))


def test_names_are_normalised_to_nfc_before_the_checks() -> None:
    nfd = "cafe\u0301/re\u0301sume\u0301.txt"
    assert check_path(nfd) == ("caf\u00e9", "r\u00e9sum\u00e9.txt")
    assert normal_path(nfd) == "caf\u00e9/r\u00e9sum\u00e9.txt"
    assert list(versions(nfd))[:2] == [
        "caf\u00e9/r\u00e9sum\u00e9.txt",
        "caf\u00e9/r\u00e9sum\u00e9-v2.txt",
    ]


def test_registrations_recorded_before_the_portability_rules_stay_readable() -> None:
    for old in ("...", "ab:c.txt", "nul.txt", "cafe\u0301.txt"):
        assert check_path(old, portable=False) == tuple(old.split("/"))
    with pytest.raises(InvalidInput):
        check_path("../x", portable=False)


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        check_path(b"x.txt")
    assert info.value.reason == "ARTIFACT_PATH_INVALID"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("x/y.txt", (None, "x/y.txt")),
        ("s3://bucket/a/b.txt", ("bucket", "a/b.txt")),
        ("S3://bucket/a", ("bucket", "a")),
        ("s3://bucket", ("bucket", "")),
        ("s3:x", (None, "s3:x")),
    ],
)
def test_references(ref: str, expected: tuple[str | None, str]) -> None:
    assert split_reference(ref) == expected


@pytest.mark.parametrize("ref", ["file:///etc/passwd", "https://example.com/x", "s3:\\\\b\\k"])
def test_other_schemes_are_refused(ref: str) -> None:
    with pytest.raises(InvalidInput) as info:
        split_reference(ref)
    assert info.value.reason == "ARTIFACT_PATH_SCHEME"


@pytest.mark.parametrize(
    ("name", "stem", "ext"),
    [
        ("plot.png", "plot", ".png"),
        ("gtm.pkl.gz", "gtm", ".pkl.gz"),
        ("archive.tar.zst", "archive", ".tar.zst"),
        ("README", "README", ""),
        (".env", ".env", ""),
        (".config.yaml", ".config", ".yaml"),
        ("report.2024.pdf", "report.2024", ".pdf"),
        ("[...slug].ts", "[...slug]", ".ts"),
        ("a..b.txt", "a..b", ".txt"),
        ("trailing.", "trailing.", ""),
        ("x.gz", "x", ".gz"),
    ],
)
def test_split_extension(name: str, stem: str, ext: str) -> None:
    assert split_extension(name) == (stem, ext)


@pytest.mark.parametrize(
    ("path", "first"),
    [
        ("plot.png", ["plot.png", "plot-v2.png", "plot-v3.png"]),
        ("gtm.pkl.gz", ["gtm.pkl.gz", "gtm-v2.pkl.gz", "gtm-v3.pkl.gz"]),
        ("README", ["README", "README-v2", "README-v3"]),
        ("out/plot-v2.png", ["out/plot-v2.png", "out/plot-v3.png", "out/plot-v4.png"]),
        ("model-v1.ckpt", ["model-v1.ckpt", "model-v1-v2.ckpt", "model-v1-v3.ckpt"]),
    ],
)
def test_versions(path: str, first: list[str]) -> None:
    assert list(itertools.islice(versions(path), 3)) == first


def test_versions_never_exceed_the_name_limit() -> None:
    name = "x" * 251 + ".png"
    with pytest.raises(InvalidInput) as info:
        list(itertools.islice(versions(name), 2))
    assert info.value.reason == "ARTIFACT_NAME_TOO_LONG"


ALPHABET = [
    "a", "b", "é", "日", " ", ".", "..", "/", "\\", "%", "2e", "2f", "5c", ":", "C", "~", "\x00",
    "\n", "\u2024", "\uff0e", "\u2215", "\uff0f", "\u202e", "&#46;", "manifest.json", "events",
    ".staging", "artifacts/index.json",
]  # fmt: skip


@pytest.fixture(scope="module")
def confinement() -> Iterator[tuple[Path, LocalArtifactStore, Iterator[int]]]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(b"secret")
        yield base, LocalArtifactStore(base / "store"), itertools.count()


@settings(max_examples=300, deadline=None)
@given(path=st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=12).map("".join))
def test_accepted_paths_stay_inside_the_run_and_are_reachable_by_the_same_name(
    confinement: tuple[Path, LocalArtifactStore, Iterator[int]], path: str
) -> None:
    base, store, counter = confinement
    run_id = f"run-{next(counter)}"
    run_dir = (base / "store" / run_id).resolve()
    try:
        stored = store.put(run_id, path, b"payload")
    except Failure:
        accepted = False
    else:
        accepted = True
    if accepted:
        target = Path(os.path.realpath(run_dir / path))
        assert target.is_relative_to(run_dir)
        assert target.read_bytes() == b"payload"
        assert stored.path == path
        assert store.read_bytes(run_id, path, expected_sha256=stored.sha256) == b"payload"
        assert [i.path for i in store.list(run_id)] == [path]
    else:
        assert store.list(run_id) == []
    # Nothing outside the run directories was created or changed, whatever happened.
    assert sorted(p.name for p in base.iterdir()) == ["outside", "store"]
    assert sorted(p.name for p in (base / "outside").iterdir()) == ["secret.txt"]
    assert (base / "outside" / "secret.txt").read_bytes() == b"secret"
    assert all(p.name.startswith("run-") for p in (base / "store").iterdir())
