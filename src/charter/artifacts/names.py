"""Artifact path rules, decided without I/O: what a run-relative path may be, and its versions.

An artifact path is a ``/``-separated, run-relative name such as ``reports/summary.md``. Every
store checks it with :func:`check_path` before touching anything. The path is first normalised to
Unicode NFC (:func:`normal_path`), so the composed and decomposed spellings of ``café.txt`` are one
name: every rule below is checked on the NFC form, and the NFC form is what stores write and
registries record. Refused — each with its own reason — are the forms that could name something
outside the run, something other than what it appears to name, or a name some file system
(Windows, SMB shares, an export unpacked elsewhere) cannot hold:

* ``ARTIFACT_PATH_EMPTY`` — the empty string; ``ARTIFACT_PATH_INVALID`` — not a string;
* ``ARTIFACT_PATH_ENCODED`` — lone surrogates (bytes that were not UTF-8), percent-encoding
  (``%2e``, ``%2F``, ``%252e``, ``%u002e`` — any ``%`` followed by two hex digits or ``u`` and
  four), HTML numeric entities (``&#46;``, ``&#x2f;``);
* ``ARTIFACT_PATH_CONTROL_CHAR`` — NUL, any other control character, and the invisible format
  and separator characters (bidi overrides, zero-width joiners, U+2028/U+2029);
* ``ARTIFACT_PATH_ABSOLUTE`` — a leading ``/``, a drive (``C:``, ``C:\\``, ``c:/``) or a UNC
  prefix (``\\\\server``);
* ``ARTIFACT_PATH_BACKSLASH`` — any other backslash;
* ``ARTIFACT_PATH_LOOKALIKE`` — a Unicode look-alike of ``.``, ``/``, ``\\`` or ``%``: any
  non-ASCII character whose NFKC form contains one of them (U+2024 ONE DOT LEADER, U+FF0E,
  U+FE52, U+2026, U+FF0F, U+FF3C, U+FF05, ...) plus the slashes NFKC leaves alone (U+2215
  DIVISION SLASH, U+2044 FRACTION SLASH, U+29F8 BIG SOLIDUS, U+2571, U+27CB, U+1735, U+2216
  SET MINUS, U+29F5, U+29F9, U+27CD). They are refused, never normalised: a name is stored
  exactly as given, so it stays reachable by the same name;
* ``ARTIFACT_PATH_EMPTY_COMPONENT`` — ``a//b``, a trailing ``/``;
* ``ARTIFACT_PATH_TRAVERSAL`` — a ``.`` or ``..`` component (``a..b.txt`` and ``[...slug].ts``
  are ordinary names and are accepted);
* ``ARTIFACT_PATH_COLON`` — a ``:`` anywhere (``report.txt:hidden``, ``x::$DATA`` name NTFS
  alternate data streams);
* ``ARTIFACT_PATH_BLANK_COMPONENT`` — a component that is only whitespace (``" "``, ``a/ /b``);
* ``ARTIFACT_PATH_TRAILING_DOT_OR_SPACE`` — a component ending in ``.`` or whitespace (Windows
  drops them, so ``a.txt.`` and ``a.txt`` would be one file there; ``...`` is refused too);
* ``ARTIFACT_PATH_DEVICE_NAME`` — a Windows device name as a component, in any case, with or
  without extensions or spaces before the first dot: ``CON``, ``PRN``, ``AUX``, ``NUL``,
  ``COM0``–``COM9``, ``LPT0``–``LPT9`` (also with superscript ¹ ² ³), ``CONIN$``, ``CONOUT$``
  — so ``nul.txt``, ``aux.json``, ``LPT1.log``, ``con.tar.gz``;
* ``ARTIFACT_NAME_TOO_LONG`` — a component over 255 UTF-8 bytes; ``ARTIFACT_PATH_TOO_LONG`` —
  a path over 1024 bytes; ``ARTIFACT_PATH_TOO_DEEP`` — more than 32 components;
* ``ARTIFACT_PATH_RESERVED`` — the run's own files: ``manifest.json``, anything under
  ``events/``, ``artifacts/index.json``, anything under ``.staging/``. Compared case-folded, so
  an export to a case-insensitive file system cannot collide with them either.

A name that holds a known secret value (an API key, a token a tool was given, in any form the
deployment's redactor recognises) is refused with ``ARTIFACT_NAME_SECRET`` before it reaches a
disk, an index, an event or the database: :func:`check_name_secret`, given the redactor's test.

References may also be URIs: :func:`split_reference` separates ``s3://bucket/key`` (stores
decide whether the bucket is theirs: ``ARTIFACT_BUCKET_FOREIGN``) and refuses every other
scheme (``ARTIFACT_PATH_SCHEME``).

Repeated names get ``-vN`` before the whole extension (:func:`versions`): ``plot.png →
plot-v2.png``, ``gtm.pkl.gz → gtm-v2.pkl.gz``, ``README → README-v2``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

from charter.errors import InvalidInput

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024
MAX_DEPTH = 32
MAX_VERSIONS = 10_000

_DRIVE = re.compile(r"^[A-Za-z]:")
_PERCENT = re.compile(r"%(?:[0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4})")
_ENTITY = re.compile(r"&#(?:[0-9]+|[xX][0-9A-Fa-f]+);?")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//|\\\\)")
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SEPARATOR_LIKE = frozenset("./\\%")
_EXTRA_LOOKALIKES = frozenset(
    "\u2215\u2044\u29f8\u2571\u27cb\u1735\u2216\u29f5\u29f9\u27cd\u2041\u2cc6\u0701\u0702\ua60e"
)
_COMPRESSION = frozenset(
    {"gz", "bz2", "xz", "zst", "zstd", "lz4", "lzma", "br", "z", "sz", "lz", "age", "gpg"}
)
_DEVICES = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"{kind}{n}" for kind in ("com", "lpt") for n in "0123456789\u00b9\u00b2\u00b3"}
)
_VERSIONED = re.compile(r"^(?P<base>.+)-v(?P<n>[2-9]|[1-9][0-9]+)$")


def _refuse(reason: str, message: str) -> InvalidInput:
    return InvalidInput(message, reason=reason)


def _is_lookalike(char: str) -> bool:
    if char.isascii():
        return False
    if char in _EXTRA_LOOKALIKES:
        return True
    return any(c in _SEPARATOR_LIKE for c in unicodedata.normalize("NFKC", char))


def normal_path(path: object) -> str:
    """The NFC form of a valid run-relative artifact path (what is stored and registered)."""
    return "/".join(check_path(path))


def is_device_name(part: str) -> bool:
    """True for a Windows device name, with or without extensions (``nul.txt``, ``COM1``)."""
    return part.split(".", 1)[0].rstrip(" ").casefold() in _DEVICES


def check_path(path: object, *, portable: bool = True) -> tuple[str, ...]:
    """Return the NFC components of a valid run-relative artifact path; raise ``InvalidInput``.

    ``portable=False`` (for reading registrations recorded before the portability rules)
    skips the NFC normalisation and the ``:``, blank, trailing dot/space and device-name rules.
    """
    if not isinstance(path, str):
        raise _refuse("ARTIFACT_PATH_INVALID", "an artifact path must be a string")
    if not path:
        raise _refuse("ARTIFACT_PATH_EMPTY", "the artifact path is empty")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse(
            "ARTIFACT_PATH_ENCODED", "the artifact path is not valid Unicode (lone surrogate)"
        ) from None
    if portable and not unicodedata.is_normalized("NFC", path):
        path = unicodedata.normalize("NFC", path)
        encoded = path.encode("utf-8")
    for char in path:
        if (not char.isascii() or char < " " or char == "\x7f") and (
            unicodedata.category(char) in _INVISIBLE
        ):
            raise _refuse(
                "ARTIFACT_PATH_CONTROL_CHAR",
                f"the artifact path contains a control or format character (U+{ord(char):04X})",
            )
    if path.startswith(("/", "\\\\")) or _DRIVE.match(path):
        raise _refuse("ARTIFACT_PATH_ABSOLUTE", "an artifact path must be relative to its run")
    if "\\" in path:
        raise _refuse("ARTIFACT_PATH_BACKSLASH", "an artifact path must not contain a backslash")
    if portable and ":" in path:
        raise _refuse("ARTIFACT_PATH_COLON", "an artifact path must not contain ':' (not portable)")
    if _PERCENT.search(path) or _ENTITY.search(path):
        raise _refuse("ARTIFACT_PATH_ENCODED", "an artifact path must not contain encoded bytes")
    for char in path:
        if _is_lookalike(char):
            raise _refuse(
                "ARTIFACT_PATH_LOOKALIKE",
                f"the artifact path contains U+{ord(char):04X}, a look-alike of a path separator "
                "or dot",
            )
    if len(encoded) > MAX_PATH_BYTES:
        raise _refuse(
            "ARTIFACT_PATH_TOO_LONG", f"an artifact path is at most {MAX_PATH_BYTES} bytes"
        )
    parts = tuple(path.split("/"))
    if len(parts) > MAX_DEPTH:
        raise _refuse("ARTIFACT_PATH_TOO_DEEP", f"an artifact path has at most {MAX_DEPTH} parts")
    for part in parts:
        if not part:
            raise _refuse("ARTIFACT_PATH_EMPTY_COMPONENT", "an artifact path has an empty part")
        if part in {".", ".."}:
            raise _refuse("ARTIFACT_PATH_TRAVERSAL", "an artifact path must not contain . or ..")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise _refuse(
                "ARTIFACT_NAME_TOO_LONG",
                f"each part of an artifact path is at most {MAX_COMPONENT_BYTES} bytes",
            )
        if not portable:
            continue
        if part.isspace():
            raise _refuse(
                "ARTIFACT_PATH_BLANK_COMPONENT", "a part of an artifact path is only whitespace"
            )
        if part[-1] == "." or part[-1].isspace():
            raise _refuse(
                "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE",
                "a part of an artifact path must not end in a dot or a space (not portable)",
            )
        if is_device_name(part):
            raise _refuse(
                "ARTIFACT_PATH_DEVICE_NAME",
                "a part of an artifact path is a Windows device name (not portable)",
            )
    if is_reserved(parts):
        raise _refuse("ARTIFACT_PATH_RESERVED", "the path names one of the run's own files")
    return parts


def is_reserved(parts: tuple[str, ...]) -> bool:
    """True for the run's own files: manifest.json, events/, artifacts/index.json, .staging/."""
    folded = tuple(p.casefold() for p in parts[:2])
    return (
        folded[0] in {"events", ".staging"}
        or folded == ("manifest.json",)
        or folded == ("artifacts", "index.json")
    )


def split_reference(ref: str) -> tuple[str | None, str]:
    """Split ``s3://bucket/key`` into ``(bucket, key)``; a plain path gives ``(None, path)``.

    Any other URI scheme (``file://``, ``https://``, ...) is refused: ``ARTIFACT_PATH_SCHEME``.
    """
    if not isinstance(ref, str):
        raise _refuse("ARTIFACT_PATH_INVALID", "an artifact path must be a string")
    match = _SCHEME.match(ref)
    if match is None:
        return None, ref
    if match.group(1).lower() != "s3" or match.group(2) != "//":
        raise _refuse("ARTIFACT_PATH_SCHEME", "only s3:// references name artifacts")
    bucket, _, key = ref[len("s3://") :].partition("/")
    return bucket, key


def split_extension(name: str) -> tuple[str, str]:
    """Split a file name into stem and whole extension.

    The extension is the last ``.suffix`` — plus the one before it when the last is a
    compression or encryption suffix (``.pkl.gz``, ``.tar.zst``, ``.csv.age``). A leading dot
    is part of the stem (``.env`` has no extension); so is a dot that ends the name.
    """
    body = name.lstrip(".")
    lead = name[: len(name) - len(body)]
    stem, dot, last = body.rpartition(".")
    if not dot or not stem or not last:
        return name, ""
    ext = "." + last
    if last.lower() in _COMPRESSION:
        inner_stem, inner_dot, inner = stem.rpartition(".")
        if inner_dot and inner_stem and inner:
            return lead + inner_stem, "." + inner + ext
    return lead + stem, ext


def versions(path: str) -> Iterator[str]:
    """``path`` itself, then ``<stem>-v2<ext>``, ``-v3``, ... (at most :data:`MAX_VERSIONS`).

    A name that already carries a version (``plot-v2.png``) continues from it: ``plot-v3.png``.
    """
    parts = check_path(path)
    head, name = parts[:-1], parts[-1]
    stem, ext = split_extension(name)
    start = 2
    found = _VERSIONED.match(stem)
    if found is not None:
        stem, start = found.group("base"), int(found.group("n")) + 1
    prefix = "/".join(head) + "/" if head else ""
    yield "/".join(parts)
    for n in range(start, start + MAX_VERSIONS):
        candidate = f"{stem}-v{n}{ext}"
        if len(candidate.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise _refuse(
                "ARTIFACT_NAME_TOO_LONG", "the versioned name would exceed the length limit"
            )
        yield prefix + candidate


def check_name_secret(path: str, contains_secret: Callable[[str], bool] | None) -> None:
    """Refuse a name that holds a known secret (``contains_secret`` is the redactor's test).

    The message never repeats the name.
    """
    if contains_secret is not None and contains_secret(path):
        raise InvalidInput(
            "the artifact name contains a secret value; choose another name (not echoed)",
            reason="ARTIFACT_NAME_SECRET",
        )
