"""The kernel is composed, not inherited: its parts are objects over one shared state, and
the call path's methods pass one attempt instead of long parameter lists."""

from __future__ import annotations

import ast
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import charter.kernel
from charter.kernel.answers import Answers
from charter.kernel.approvals import ApprovalGate
from charter.kernel.dispatch import Dispatcher
from charter.kernel.kernel import Kernel
from charter.kernel.operators import Operators
from charter.kernel.redaction import Redactor
from charter.testing.clock import FakeClock
from tests.kernel.conftest import KEY, make_kernel

KERNEL = Path(charter.kernel.__file__).parent
PARTS = ("kernel", "core", "answers", "approvals", "dispatch", "operators")
# Public signatures that callers (runtime, edges, tests) use as they are.
PUBLIC = {"__init__", "call", "resolve_context", "decide"}
MAX_PARAMETERS = 6  # besides self, keyword-only included


def test_the_kernel_holds_its_parts_instead_of_inheriting_them(project: Path) -> None:
    from charter.stores.memory import MemoryStore

    clock = FakeClock(step=timedelta(0))
    kernel = make_kernel(project, MemoryStore(key=KEY, clock=clock), clock)
    assert Kernel.__mro__ == (Kernel, object)
    parts = (kernel.answers, kernel.approvals, kernel.dispatcher, kernel.operators)
    assert [type(p) for p in parts] == [Answers, ApprovalGate, Dispatcher, Operators]
    assert all(p.state is kernel.state for p in parts)
    for cls in (Answers, ApprovalGate, Dispatcher, Operators):
        assert cls.__mro__ == (cls, object)


def test_what_is_set_on_the_kernel_reaches_every_part(project: Path) -> None:
    """The runtime sets ``artifacts`` after construction; tests swap settings and clocks."""
    from charter.stores.memory import MemoryStore

    clock = FakeClock(step=timedelta(0))
    kernel = make_kernel(project, MemoryStore(key=KEY, clock=clock), clock)
    settings = replace(kernel.settings, token_budget=10)
    redactor = Redactor(patterns=[r"sk-[0-9a-f]{8}"])
    later = FakeClock(step=timedelta(0))
    kernel.settings, kernel.redactor, kernel.clock = settings, redactor, later
    for part in (kernel.answers, kernel.approvals, kernel.dispatcher, kernel.operators):
        assert part.state.settings is settings
        assert part.state.redactor is redactor
        assert part.state.clock is later
    assert kernel.settings is settings
    assert kernel.clock is later


def test_no_method_of_the_call_path_takes_a_long_parameter_list() -> None:
    long = []
    for name in PARTS:
        tree = ast.parse((KERNEL / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            count = len(params) - (1 if params and params[0].arg in ("self", "cls") else 0)
            if count > MAX_PARAMETERS and node.name not in PUBLIC:
                long.append(f"{name}.py:{node.lineno} {node.name} ({count})")
    assert long == []
