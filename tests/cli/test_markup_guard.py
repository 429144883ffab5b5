"""A static guard: no value reaches rich markup in ``src/charter/cli`` unescaped.

Rich reads ``[...]`` in a printed string, a table cell and a table title as markup: a value
such as an operator's reason ``[/]`` would end the command with a MarkupError, and ``[red]x``
would restyle (or hide) what follows. So every interpolation in a string printed with markup,
every ``Table.add_row`` cell and every table title is either ``escape(...)`` (or the chat
stream's ``_v(...)``), a literal, a count (``len(...)``), or one of the expressions listed in
``_KNOWN_SAFE`` below: literal styles and numbers, each named with its file. A new site that
prints a value with markup fails here until it escapes the value or prints with
``markup=False``.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "charter" / "cli"

_ESCAPERS = {"escape", "_v", "error_line"}  # error_line escapes what it is given (_output.py)

# (file, expression) that are never a stored or given text: literal styled words, enums and
# numbers. Anything else interpolated into markup must be escaped.
_KNOWN_SAFE = {
    ("_output.py", "table"),  # a Table: its cells and title are checked where it is made
    ("_output.py", "title"),  # show_envelope's title: a literal at every caller
    ("chat_cmds.py", "': ' + hint if hint else ''"),  # HINTS: literal sentences
    ("check_cmds.py", "_STATE[t.status]"),  # literal styled states
    ("disclosure_cmds.py", "head"),  # built just above from escaped values
    ("disclosure_cmds.py", "orphan['seq']"),  # an int
    ("disclosure_cmds.py", "_FLAG_TEXT[name]"),  # literal sentences
    ("kernel_cmds.py", "colour"),  # a literal colour name
    ("kernel_cmds.py", "env.status.value"),  # a CallStatus enum value
    ("kernel_cmds.py", "env.metrics.duration_ms"),  # a float
    ("kernel_cmds.py", "key"),  # the literal field names of `approvals show`
    ("kernel_cmds.py", "table"),  # a Table: its cells are checked where they are added
    ("runs.py", "doc['event_count']"),  # an int
    ("runs.py", "report.events"),  # an int
    ("workflow_cmds.py", "result"),  # literal styled pass/FAIL
    ("workflow_cmds.py", "str(c.seq)"),  # an int
    ("workflow_cmds.py", "style"),  # a literal style tag
    ("workflow_cmds.py", "verdict"),  # literal promoted / styled refused
    ("workflow_cmds.py", "result.generation"),  # an int
    ("workflow_cmds.py", "got.verify.events"),  # an int
}


def _unsafe(expr: ast.expr, file: str) -> list[str]:
    """The parts of ``expr`` that would reach markup unescaped."""
    if isinstance(expr, ast.Constant):
        return []
    if isinstance(expr, ast.Call) and ast.unparse(expr.func) in {*_ESCAPERS, "len"}:
        return []
    if (file, ast.unparse(expr)) in _KNOWN_SAFE:
        return []
    if isinstance(expr, ast.Call):
        callee = ast.unparse(expr.func)
        if callee in {"Text", "Text.assemble"}:  # a Text is never parsed as markup
            return []
        if callee == "Panel":  # a Panel reads a str body and its title as markup
            parts = expr.args[:1] + [k.value for k in expr.keywords if k.arg == "title"]
            return [bad for part in parts for bad in _unsafe(part, file)]
    if isinstance(expr, ast.JoinedStr):
        return [
            bad
            for part in expr.values
            if isinstance(part, ast.FormattedValue)
            for bad in _unsafe(part.value, file)
        ]
    if isinstance(expr, ast.IfExp):
        return _unsafe(expr.body, file) + _unsafe(expr.orelse, file)
    if isinstance(expr, ast.BinOp):
        return _unsafe(expr.left, file) + _unsafe(expr.right, file)
    if isinstance(expr, ast.GeneratorExp):
        return _unsafe(expr.elt, file)
    if isinstance(expr, ast.Starred):
        return _unsafe(expr.value, file)
    return [ast.unparse(expr)]


def _markup_off(call: ast.Call) -> bool:
    return any(
        k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in call.keywords
    )


def _findings(source: str, file: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        reached: list[ast.expr] = []
        if name == "print" and isinstance(func, ast.Attribute) and not _markup_off(node):
            reached = node.args[:1]  # console.print / err_console.print
        elif name == "add_row":
            reached = list(node.args)
        elif name == "Table":
            reached = [k.value for k in node.keywords if k.arg == "title"]
        found += [f"{file}:{node.lineno}: {bad}" for e in reached for bad in _unsafe(e, file)]
    return found


def test_every_value_printed_with_markup_is_escaped() -> None:
    files = sorted(CLI.glob("*.py"))
    assert len(files) > 10
    found = [bad for f in files for bad in _findings(f.read_text(), f.name)]
    assert found == [], "escape these (rich.markup.escape) or print with markup=False:\n" + (
        "\n".join(found)
    )


def test_the_guard_sees_an_unescaped_value() -> None:
    """The guard itself: each shape it must catch is caught, each escaped one passes."""
    bad = [
        'console.print(f"run [bold]{run_id}[/]")',
        "err_console.print(f\"{row['reason']}\", soft_wrap=True)",
        "console.print(message)",
        "table.add_row(r['tool_id'], escape(r['call_id']))",
        "table.add_row(*(str(c) for c in cells))",
        'Table(title=f"tasks of {run_id}")',
        "console.print(Panel(body))",
    ]
    for line in bad:
        assert _findings(line, "x.py"), line
    good = [
        'console.print(f"run [bold]{escape(run_id)}[/] {len(rows)} rows")',
        'console.print(f"run {run_id}", markup=False)',
        "table.add_row(*(escape(str(c)) for c in cells))",
        'Table(title=f"tasks of {escape(run_id)}")',
        'console.print("[green]ok[/]")',
        "console.print(Panel(Text(body), title='literal'))",
    ]
    for line in good:
        assert _findings(line, "x.py") == [], line
