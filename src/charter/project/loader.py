"""Collect a project's tool declarations from YAML files and Python modules.

Every problem is collected, not raised, so that ``charter build`` reports them all at once.
Paths in problems and in the Build are relative to the project directory (POSIX style), so
Builds do not depend on where the project was checked out.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from charter.contracts.decorator import declaration
from charter.contracts.model import ToolContract, make_contract
from charter.errors import Problem, ProjectError
from charter.project.config import ToolSources
from charter.project.yamlio import load_yaml


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedTool:
    contract: ToolContract
    source: str  # the file it was declared in, relative to the project
    pointer: str  # where in that file ("" for a Python function)
    entrypoint: str | None = None  # "tools/notes.py:add_note" for Python tools


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _expand(root: Path, pattern: str, what: str, problems: list[Problem]) -> list[Path]:
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        problems.append(
            Problem(
                message=f"{what} {pattern!r} must be a path inside the project", file="charter.yaml"
            )
        )
        return []
    matches = sorted(p for p in root.glob(pattern) if p.is_file())
    if not matches:
        problems.append(Problem(message=f"{what} {pattern!r} matches no file", file="charter.yaml"))
    outside = [p for p in matches if not _inside(p, root)]
    for path in outside:
        problems.append(
            Problem(message=f"{path} resolves outside the project (symlink?)", file="charter.yaml")
        )
    return [p for p in matches if p not in outside]


def _yaml_tools(root: Path, path: Path, problems: list[Problem]) -> list[LoadedTool]:
    display = _relative(path, root)
    try:
        data = load_yaml(path, display=display)
    except ProjectError as exc:
        problems.append(exc.problem)
        return []
    if isinstance(data, dict) and "tools" in data and set(data) == {"tools"}:
        items, base = data["tools"], "/tools"
        if not isinstance(items, list):
            problems.append(
                Problem(message="`tools` must be a list", file=display, pointer="/tools")
            )
            return []
    elif isinstance(data, dict):
        items, base = [data], None
    else:
        problems.append(
            Problem(
                message="a tool file holds one tool (a mapping) or `tools:` with a list",
                file=display,
                pointer="",
            )
        )
        return []
    loaded = []
    for index, item in enumerate(items):
        where = f"{base}/{index}" if base is not None else ""
        if not isinstance(item, dict):
            problems.append(
                Problem(message="a tool must be a mapping", file=display, pointer=where)
            )
            continue
        contract, found = make_contract(item, file=display, where=where)
        problems.extend(found)
        if contract is not None:
            loaded.append(LoadedTool(contract=contract, source=display, pointer=where))
    return loaded


@contextmanager
def _project_on_path(root: Path) -> Iterator[None]:
    entry = str(root.resolve())
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with suppress(ValueError):
            sys.path.remove(entry)


def module_name(relative: str) -> str:
    """``tools/notes.py`` → ``tools.notes``."""
    return relative.removesuffix(".py").replace("/", ".")


def import_project_module(root: Path, relative: str) -> ModuleType:
    """Import a project's Python file fresh, with the project directory on ``sys.path``."""
    name = module_name(relative)
    path = root / relative
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {relative}")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        with _project_on_path(root):
            spec.loader.exec_module(module)
    except BaseException as exc:
        if previous is not None:
            sys.modules[name] = previous
        else:
            sys.modules.pop(name, None)
        if isinstance(exc, SystemExit):
            # sys.exit() in a tool module must not end the process importing it (a build,
            # a server, an MCP session) without a word: it is the module's import failing.
            raise ImportError(
                f"the module raised SystemExit({exc.code!r}) while being imported "
                "(a tool module must not exit the process)"
            ) from exc
        raise
    return module


def _python_tools(root: Path, path: Path, problems: list[Problem]) -> list[LoadedTool]:
    display = _relative(path, root)
    if path.suffix != ".py":
        problems.append(Problem(message="a Python tool module must be a .py file", file=display))
        return []
    try:
        module = import_project_module(root, display)
    except Exception as exc:
        where = exc.__cause__ if isinstance(exc.__cause__, SystemExit) else exc
        frame = traceback.extract_tb(where.__traceback__)[-1] if where.__traceback__ else None
        here = frame is not None and Path(frame.filename).resolve() == path.resolve()
        line = f" (line {frame.lineno})" if frame is not None and here else ""
        problems.append(
            Problem(
                message=f"importing the module failed{line}: {type(exc).__name__}: {exc}",
                file=display,
            )
        )
        return []
    loaded = []
    for attr in sorted(vars(module)):
        obj: Any = getattr(module, attr)
        decl = declaration(obj) if callable(obj) else None
        if decl is None or getattr(obj, "__module__", None) != module.__name__:
            continue
        tool_id = str(decl.data.get("id"))
        if decl.problem:
            problems.append(Problem(message=decl.problem, file=display, tool=tool_id))
            continue
        contract, found = make_contract(dict(decl.data), file=display)
        problems.extend(found)
        if contract is not None:
            loaded.append(
                LoadedTool(
                    contract=contract,
                    source=display,
                    pointer="",
                    entrypoint=f"{display}:{obj.__qualname__}",
                )
            )
    if not loaded and not any(p.file == display for p in problems):
        problems.append(Problem(message="declares no @charter.tool function", file=display))
    return loaded


def load_tools(root: Path, sources: ToolSources) -> tuple[list[LoadedTool], list[Problem]]:
    problems: list[Problem] = []
    tools: list[LoadedTool] = []
    for pattern in sources.files:
        for path in _expand(root, pattern, "tool file pattern", problems):
            tools.extend(_yaml_tools(root, path, problems))
    for pattern in sources.python:
        for path in _expand(root, pattern, "Python tool module", problems):
            tools.extend(_python_tools(root, path, problems))
    return tools, problems
