"""One front door: no module outside ``charter.kernel`` and ``charter.runtime`` reaches into a
runtime's kernel (``runtime.kernel.call``, ``rt.kernel.store``, ``self.kernel = kernel``).

Every edge — server routes and console, MCP, the CLI, chat, adapters, the proposal and
workflow services — goes through :class:`charter.runtime.Runtime`. The check is an AST walk:
any attribute named ``kernel`` read or written in another module fails it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import charter

SRC = Path(charter.__file__).parent
ALLOWED = ("kernel/", "runtime.py", "runtime/")


def kernel_reaches(source: str) -> list[int]:
    """Line numbers of every ``<expr>.kernel`` attribute in ``source``."""
    tree = ast.parse(source)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "kernel"
    )


def test_the_check_finds_a_reach_into_the_kernel() -> None:
    edge = (
        "async def make_call(state):\n"
        "    return await state.runtime.kernel.call('c', 't', 'x', {})\n"
        "def wire(self, rt):\n"
        "    self.kernel = rt\n"
    )
    assert kernel_reaches(edge) == [2, 4]
    assert kernel_reaches("from charter.kernel.kernel import Kernel\nimport charter.kernel\n") == []


def test_no_edge_reaches_into_the_runtimes_kernel() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(ALLOWED):
            continue
        for line in kernel_reaches(path.read_text(encoding="utf-8")):
            offenders.append(f"charter/{relative}:{line}")
    assert offenders == [], "use the Runtime façade instead of .kernel: " + ", ".join(offenders)
