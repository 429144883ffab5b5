"""Report how many documentation examples ran and which were skipped, and why."""

from __future__ import annotations

from typing import Any

from tests.docs.examples import blocks, pages


def pytest_terminal_summary(terminalreporter: Any) -> None:
    found = [b for p in pages() for b in blocks(p)]
    skipped = [b for b in found if b.skip is not None]
    terminalreporter.write_line(
        f"docs examples: {len(found) - len(skipped)} run, {len(skipped)} skipped"
    )
    for b in skipped:
        terminalreporter.write_line(f"  skipped {b.where}: {b.skip}")
