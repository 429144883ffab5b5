"""Strict, bounded YAML reading for project files.

Duplicate keys are errors, not silent overwrites. Every project file (``charter.yaml``, YAML and
JSON tool files, workflow and skill front matter) is bounded before and while it is parsed, so a
hostile or broken file is refused quickly with a one-line error naming the file and the limit —
never a ``RecursionError`` traceback, never minutes of parsing:

* :data:`MAX_FILE_BYTES` — a file larger than this is refused before a byte is parsed;
* :data:`MAX_DEPTH` — nodes nested deeper (the document's root is level 1, a scalar inside it
  level 2) are refused while composing (PyYAML's composer recurses once per level, so the bound
  keeps it far from Python's recursion limit);
* :data:`MAX_NODES` — the number of nodes, counting each alias as the whole node it repeats (so
  a "billion laughs" of nested aliases is refused at the limit instead of being expanded later).
  An alias also counts the depth of what it repeats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent

from charter.errors import ProjectError

MAX_FILE_BYTES = 1 << 20
"""Largest project file read (1 MiB)."""

MAX_DEPTH = 64
"""Deepest nesting of nodes in a project file (the root is level 1; aliases included)."""

MAX_NODES = 50_000
"""Most nodes in a project file, each alias counted as the node it repeats."""


class LimitExceeded(yaml.YAMLError):
    """A project file passes one of the parsing limits."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


try:  # libyaml scans and parses in C (the slow part in pure Python); composing stays here
    from yaml._yaml import CParser as _Parser

    _C_PARSER = True
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser as _Parser  # type: ignore[assignment]

    _C_PARSER = False


class _StrictLoader(
    yaml.composer.Composer,
    _Parser,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """A safe loader that refuses duplicate mapping keys and bounds depth and alias expansion.

    PyYAML's Python composer (on libyaml's parser when present) builds the node tree, so the
    bounds are checked as each node is composed.
    """

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        if not _C_PARSER:  # pragma: no cover
            yaml.reader.Reader.__init__(self, stream)  # type: ignore[arg-type]
            yaml.scanner.Scanner.__init__(self)  # type: ignore[arg-type]
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0
        self._deepest = 0
        self._nodes = 0
        self._anchored: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height)

    def _count(self, nodes: int, depth: int, mark: Any) -> None:
        self._nodes += nodes
        if self._nodes > MAX_NODES:
            raise LimitExceeded(
                f"more than {MAX_NODES} nodes (aliases counted as what they repeat); "
                f"the limit is {MAX_NODES}",
                mark,
            )
        if depth > MAX_DEPTH:
            raise LimitExceeded(
                f"nested deeper than {MAX_DEPTH} levels; the limit is {MAX_DEPTH}", mark
            )
        self._deepest = max(self._deepest, depth)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: Any = self.peek_event()
        if isinstance(event, AliasEvent):
            node = super().compose_node(parent, index)
            nodes, height = self._anchored.get(id(node), (1, 1))
            self._count(nodes, self._depth + height, event.start_mark)
            return node
        anchored = getattr(event, "anchor", None) is not None
        self._depth += 1
        self._count(1, self._depth, event.start_mark)
        before_nodes, before_deepest = self._nodes, self._deepest
        self._deepest = self._depth
        try:
            node = super().compose_node(parent, index)
        finally:
            height = self._deepest - self._depth + 1
            self._deepest = max(before_deepest, self._deepest)
            self._depth -= 1
        if anchored:
            self._anchored[id(node)] = (self._nodes - before_nodes + 1, height)
        return node


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(  # type: ignore[type-var]  # the stubs bound it to the Python loaders
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def strict_load(text: str) -> Any:
    """Parse YAML with the safe loader, refusing duplicate keys (raises ``yaml.YAMLError``).

    Depth and node count are bounded (:data:`MAX_DEPTH`, :data:`MAX_NODES`): ``LimitExceeded``.
    """
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where — never PyYAML's snippet of the line, which may hold a secret."""
    if isinstance(exc, LimitExceeded):
        mark = exc.mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"refused{where}: {exc.message}"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"invalid YAML{where}: {exc.problem}"
    return "invalid YAML"


def load_yaml_text(text: str, *, file: str) -> Any:
    try:
        return strict_load(text)
    except yaml.YAMLError as exc:
        raise ProjectError(yaml_problem(exc), file=file) from None
    except RecursionError:  # not expected within MAX_DEPTH; never a traceback all the same
        raise ProjectError(
            f"nested too deeply to parse; the limit is {MAX_DEPTH} levels", file=file
        ) from None


def read_project_text(path: Path, *, display: str, limit: int = MAX_FILE_BYTES) -> str:
    """A project file's text, refused before reading when it is over ``limit`` bytes."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise ProjectError("file not found", file=display) from None
    except OSError as exc:
        raise ProjectError(f"cannot read file: {exc.strerror}", file=display) from None
    if len(data) > limit:
        raise ProjectError(
            f"file is larger than {limit} bytes; the limit for a project file is {limit} bytes",
            file=display,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProjectError("file is not valid UTF-8", file=display) from None


def load_yaml(path: Path, *, display: str) -> Any:
    return load_yaml_text(read_project_text(path, display=display), file=display)
