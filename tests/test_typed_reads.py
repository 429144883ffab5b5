"""Typed reads: above the stores, projection rows are read as views (``find_views``,
``read_view``, ``list_views`` with ``CallRow``, ``ApprovalRow``, …), not as dicts fetched by
table name (``query_rows("calls", {...})``, then ``row["state"]``).

The check is an AST walk of ``src/charter``: a ``query_rows`` call whose first argument is a
string literal fails it, outside the stores and the ledger (which implement the read port)
and the test kit (whose suites exercise the raw port itself).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "charter"
IMPLEMENTERS = ("stores/", "ledger/", "testing/")
# Counts rather than reads: up to 4x the tenant's cap of pending approvals on every gated
# call, only their expiry and requester compared; a view per row would cost more than the count.
ALLOWED = {"kernel/limits.py": 1}


def by_table_name(source: str) -> list[tuple[int, str]]:
    """(line, table) of every ``<expr>.query_rows("<table>", …)`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "query_rows"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return sorted(found)


def test_the_check_finds_a_read_by_table_name() -> None:
    source = (
        "async def f(store, run_id, table):\n"
        "    rows = await store.query_rows(\n"
        "        'calls', {'run_id': run_id}, limit=10)\n"
        "    more = await store.query_rows(table, {})\n"
        "    return await store.find_views(CallRow, run_id=run_id)\n"
    )
    assert by_table_name(source) == [(2, "calls")]


def test_no_module_above_the_stores_reads_rows_by_table_name() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(IMPLEMENTERS):
            continue
        found = by_table_name(path.read_text(encoding="utf-8"))
        if len(found) > ALLOWED.get(relative, 0):
            offenders += [f"charter/{relative}:{line} query_rows({t!r})" for line, t in found]
    assert offenders == [], "read a typed view (find_views) instead: " + ", ".join(offenders)
