"""Strict YAML reading for project files: duplicate keys are errors, not silent overwrites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from charter.errors import ProjectError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys."""


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


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def strict_load(text: str) -> Any:
    """Parse YAML with the safe loader, refusing duplicate keys (raises ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=_StrictLoader)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where — never PyYAML's snippet of the line, which may hold a secret."""
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


def load_yaml(path: Path, *, display: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProjectError("file not found", file=display) from None
    except UnicodeDecodeError:
        raise ProjectError("file is not valid UTF-8", file=display) from None
    except OSError as exc:
        raise ProjectError(f"cannot read file: {exc.strerror}", file=display) from None
    return load_yaml_text(text, file=display)
