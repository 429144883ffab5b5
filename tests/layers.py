"""The import-layer rule of ``src/charter``, as a function any tree or graph can be fed to.

:func:`read_tree` walks a source tree with :mod:`ast` and records every ``charter`` import of
every module: module level and function-local alike, relative imports resolved, imports under
``if TYPE_CHECKING:`` left out (they never run). :func:`check` then reports, as plain
sentences naming the file and line:

- an import from a lower layer to a higher one (:data:`LAYERS`, bottom first; a package may
  import its own layer and the ones below);
- an import of a package nothing else may import (:data:`LEAVES`);
- a package that is in no layer;
- a cycle between packages, and a cycle between modules;
- a module longer than :data:`MAX_LINES` lines;
- an import of a test framework (:data:`FORBIDDEN`): the test kit's suites are plain classes.

``docs/architecture.md`` draws the same layers; keep the two in step.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = "charter"

# Bottom first. A "package" is a subpackage of charter (``kernel``), a top-level module
# (``errors``, ``runtime``), or ``__init__`` for the root package itself.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the one exception tree, the version, the tracing seam (opentelemetry-api only)
    ("errors", "_version", "telemetry"),
    # tool contracts, schema subset, canonical JSON, digests
    ("contracts",),
    # events, hash chain, projections, store ports | project source -> immutable Build
    ("ledger", "project"),
    # ledger stores (memory, SQLite, PostgreSQL) | artifact bytes: stores, registry, service
    ("stores", "artifacts"),
    # the call path and its ports: executor port, store port, readiness port, task rules
    ("kernel",),
    # what the runtime wires into the kernel, and what reads the kernel's decisions back
    ("executors", "deploy", "proof", "proposals", "workflows"),
    # the one facade: composition root and front door
    ("runtime",),
    # edges
    (
        "server",
        "mcp",
        "cli",
        "client",
        "adapters",
        "providers",
        "remote",
        "testing",
        "__main__",
        "__init__",
    ),
)

# Packages no other package of charter may import: the executor-side app runs in another
# process, the test kit is for tests, ``__main__`` is ``python -m charter``.
LEAVES: frozenset[str] = frozenset({"remote", "testing", "__main__"})

# Not modules of the package: project templates are user code that ``charter init`` copies.
EXCLUDED: tuple[str, ...] = ("charter/project/templates",)

MAX_LINES = 800

# Third-party packages no module of charter may import (at run time).
FORBIDDEN: frozenset[str] = frozenset({"pytest", "_pytest", "hypothesis"})


@dataclass(frozen=True, slots=True)
class Import:
    target: str  # the dotted module imported (the longest prefix that is a module of the tree)
    line: int


@dataclass(frozen=True, slots=True)
class Module:
    name: str  # dotted: charter.kernel.core
    path: str  # as shown in messages: charter/kernel/core.py
    lines: int
    imports: tuple[Import, ...] = field(default=())
    external: tuple[Import, ...] = field(default=())  # other top-level packages imported


def package_of(module: str) -> str:
    """``charter.kernel.core`` -> ``kernel``; ``charter.errors`` -> ``errors``; ``charter`` ->
    ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


# ---------------------------------------------------------------------------------------
# reading a tree


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _raw_imports(tree: ast.Module, name: str, is_package: bool) -> list[tuple[str, str, int]]:
    """(module, imported name or "", line) for every import that runs, at any depth."""
    found: list[tuple[str, str, int]] = []
    here = name.split(".") if is_package else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit_one(other)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, "", node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.extend((module, alias.name, node.lineno) for alias in node.names)
        else:
            visit(node)

    visit(tree)
    return found


def _resolve(module: str, name: str, known: Iterable[str]) -> str | None:
    """The module of the tree an import loads: ``from a import b`` is module ``a.b`` when that
    is a module, else ``a``; an unknown submodule falls back to its longest known prefix."""
    known = set(known)
    if module != ROOT and not module.startswith(ROOT + "."):
        return None
    if name and f"{module}.{name}" in known:
        return f"{module}.{name}"
    while module not in known and "." in module:
        module = module.rsplit(".", 1)[0]
    return module if module in known else None


def read_tree(src: Path) -> dict[str, Module]:
    """Every module under ``src/charter`` with the charter modules it imports."""
    package_dir = src / ROOT
    sources: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(src)
        if any(rel.as_posix().startswith(prefix + "/") for prefix in EXCLUDED):
            continue
        parts = list(rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        sources[".".join(parts)] = (path, is_package)
    modules: dict[str, Module] = {}
    for name, (path, is_package) in sources.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        imports = []
        external = []
        for module, imported, line in _raw_imports(tree, name, is_package):
            target = _resolve(module, imported, sources)
            if target is not None and target != name:
                imports.append(Import(target, line))
            elif target is None and module.split(".")[0] != ROOT:
                external.append(Import(module.split(".")[0], line))
        modules[name] = Module(
            name=name,
            path=path.relative_to(src).as_posix(),
            lines=len(text.splitlines()),
            imports=tuple(imports),
            external=tuple(external),
        )
    return modules


# ---------------------------------------------------------------------------------------
# checking a graph


def _cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    edges = {n: sorted(set(graph.get(n, ()))) for n in nodes}
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def check(
    modules: Mapping[str, Module],
    *,
    layers: Sequence[Sequence[str]] = LAYERS,
    leaves: Iterable[str] = LEAVES,
    max_lines: int = MAX_LINES,
    forbidden: Iterable[str] = FORBIDDEN,
) -> list[str]:
    """Every breach of the layer rule in ``modules``, as sentences; empty when it holds."""
    rank = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    leaves = frozenset(leaves)
    forbidden = frozenset(forbidden)
    problems: list[str] = []
    for pkg in sorted({package_of(m) for m in modules} - set(rank)):
        problems.append(f"package {pkg!r} is in no layer: add it to LAYERS and the doc")
    package_edges: dict[str, set[str]] = {}
    module_edges: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], str] = {}
    for module in sorted(modules.values(), key=lambda m: m.name):
        if module.lines > max_lines:
            problems.append(f"{module.path} has {module.lines} lines (more than {max_lines})")
        for ext in module.external:
            if ext.target in forbidden:
                problems.append(f"{module.path}:{ext.line} imports {ext.target}: no module may")
        source = package_of(module.name)
        for imp in module.imports:
            module_edges.setdefault(module.name, set()).add(imp.target)
            target = package_of(imp.target)
            if target == source:
                continue
            where = f"{module.path}:{imp.line} imports {imp.target}"
            package_edges.setdefault(source, set()).add(target)
            witness.setdefault((source, target), where)
            if target in leaves:
                problems.append(f"{where}: nothing may import {target!r}")
            elif source in rank and target in rank and rank[target] > rank[source]:
                problems.append(
                    f"{where}: {source!r} (layer {rank[source]}) may not import "
                    f"{target!r} (layer {rank[target]})"
                )
    for cycle in _cycles(package_edges):
        hops = [witness[(a, b)] for a in cycle for b in cycle if (a, b) in witness and a != b]
        problems.append(f"package cycle {' <-> '.join(cycle)}: " + "; ".join(hops))
    for cycle in _cycles(module_edges):
        problems.append(f"module cycle {' <-> '.join(cycle)}")
    return problems
