"""Writing a benchmark's section of ``bench/RESULTS.md`` (shared by the bench scripts).

A script replaces its own ``## <name>`` section with fresh figures, or appends it when it is
missing. Prose a person wrote below ``<!-- analysis -->`` inside the section is kept.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
MARKER = "<!-- analysis -->"


def write_section(heading: str, section: str, path: Path = RESULTS) -> None:
    """Replace the section that starts with ``heading`` (``"## ledger"``) by ``section``."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    start = text.find(heading + "\n")
    while start > 0 and text[start - 1] != "\n":  # a heading starts a line
        start = text.find(heading + "\n", start + 1)
    section = section.rstrip("\n") + "\n"
    if start < 0:
        path.write_text(text.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        return
    end = text.find("\n## ", start + 1)
    old = text[start : end + 1 if end >= 0 else len(text)]
    kept = old[old.find(MARKER) :].rstrip("\n") + "\n" if MARKER in old else ""
    rest = text[end + 1 :] if end >= 0 else ""
    new = section + ("\n" + kept if kept else "") + ("\n" + rest if rest else "")
    path.write_text(text[:start] + new, encoding="utf-8")
