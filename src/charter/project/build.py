"""Builds: the immutable, content-addressed compilation of a project.

A Build is a JSON document. Its ``digest`` is ``sha256:`` over the RFC 8785 canonical JSON
of the document without the ``digest`` field. Nothing in it depends on the machine or the
moment: no timestamps, no absolute paths, every collection in a stable order — so the same
source gives the same digest anywhere, and any change to a contract changes it.

A Build declares the runtime it needs: ``charter.runtime.v1`` when it has no tools,
``charter.runtime.v2`` when it has. A runtime that does not support what a Build needs refuses
to load it (:class:`~charter.errors.UnsupportedRuntimeError`) rather than silently ignoring
its policy.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from charter.contracts.canonical import canonical_bytes, sha256_digest
from charter.contracts.model import ToolContract
from charter.contracts.schema import check_schema
from charter.errors import BuildError, Problem, ProjectError, UnsupportedRuntimeError, UserError
from charter.project.catalog import CatalogEntry, load_catalog
from charter.project.catalog_validate import catalog_section, validate_catalog
from charter.project.config import PROJECT_FILE, ProjectConfig, parse_config
from charter.project.loader import LoadedTool, load_tools
from charter.project.suite import ContextTest, load_test_dir, suite_section
from charter.project.yamlio import load_yaml

BUILD_KIND = "charter.build"
BUILD_SCHEMA_VERSION = 1
RUNTIME_V1 = "charter.runtime.v1"
RUNTIME_V2 = "charter.runtime.v2"
SUPPORTED_RUNTIMES: tuple[str, ...] = (RUNTIME_V1, RUNTIME_V2)
logger = logging.getLogger(__name__)
BUILDS_DIR = Path(".charter") / "builds"
LATEST_FILE = "LATEST"


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildTool:
    contract: ToolContract
    source: str
    entrypoint: str | None = None

    @property
    def id(self) -> str:
        return self.contract.id


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str
    description: str
    tools: tuple[str, ...]  # the disclosed tool ids, sorted


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    name: str
    description: str
    instructions: str
    tools: tuple[str, ...]
    context_providers: tuple[str, ...]
    handoffs: tuple[str, ...] = ()  # the agents it may hand off to in a chat


@dataclass(frozen=True, slots=True, kw_only=True)
class Build:
    """A loaded, verified Build. Construct with :func:`build_project` or :func:`load_build`."""

    digest: str
    project_name: str
    project_version: str
    description: str
    requires_runtime: str
    tools: Mapping[str, BuildTool]
    profiles: Mapping[str, Profile]
    agents: Mapping[str, Agent]
    document: Mapping[str, Any] = field(repr=False, compare=False)

    def tool(self, tool_id: str) -> BuildTool:
        return self.tools[tool_id]

    def profile_tools(self, profile: str) -> tuple[ToolContract, ...]:
        return tuple(self.tools[t].contract for t in self.profiles[profile].tools)

    def to_json(self) -> str:
        return json.dumps(dict(self.document), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _problem_sort_key(p: Problem) -> tuple[str, str, str, str]:
    return (p.file or "", p.tool or "", p.pointer or "", p.message)


def _resolve_profiles(
    config: ProjectConfig, tool_ids: set[str], problems: list[Problem]
) -> dict[str, Profile]:
    profiles = {}
    for name, prof in sorted(config.profiles.items()):
        for key in ("include", "exclude"):
            for index, tool_id in enumerate(getattr(prof, key)):
                if tool_id not in tool_ids:
                    problems.append(
                        Problem(
                            message=f"profile {name!r} names unknown tool {tool_id!r}",
                            file=PROJECT_FILE,
                            pointer=f"/profiles/{name}/{key}/{index}",
                        )
                    )
        disclosed = sorted(set(prof.include) - set(prof.exclude))
        profiles[name] = Profile(name=name, description=prof.description, tools=tuple(disclosed))
    return profiles


def _agent_doc(a: Agent) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "description": a.description,
        "instructions": a.instructions,
        "tools": list(a.tools),
        "context_providers": list(a.context_providers),
    }
    if a.handoffs:  # absent when empty, so Builds without handoffs keep their digests
        doc["handoffs"] = list(a.handoffs)
    return doc


def _resolve_agents(
    config: ProjectConfig, tool_ids: set[str], problems: list[Problem]
) -> dict[str, Agent]:
    agents = {}
    for name, agent in sorted(config.agents.items()):
        for index, tool_id in enumerate(agent.tools):
            if tool_id not in tool_ids:
                problems.append(
                    Problem(
                        message=f"agent {name!r} names unknown tool {tool_id!r}",
                        file=PROJECT_FILE,
                        pointer=f"/agents/{name}/tools/{index}",
                    )
                )
        for index, role in enumerate(agent.handoffs):
            if role not in config.agents or role == name:
                problems.append(
                    Problem(
                        message=f"agent {name!r} hands off to {role!r}, which is not another agent",
                        file=PROJECT_FILE,
                        pointer=f"/agents/{name}/handoffs/{index}",
                    )
                )
        agents[name] = Agent(
            name=name,
            description=agent.description,
            instructions=agent.instructions,
            tools=tuple(sorted(agent.tools)),
            context_providers=tuple(sorted(agent.context_providers)),
            handoffs=tuple(sorted(set(agent.handoffs))),
        )
    return agents


def _check_tools(loaded: list[LoadedTool], problems: list[Problem]) -> dict[str, LoadedTool]:
    by_id: dict[str, LoadedTool] = {}
    by_name: dict[str, LoadedTool] = {}
    for item in loaded:
        c = item.contract
        if c.id in by_id:
            first = by_id[c.id]
            problems.append(
                Problem(
                    message=f"tool id {c.id!r} is declared twice (also in {first.source})",
                    file=item.source,
                    tool=c.id,
                    pointer=item.pointer or None,
                )
            )
            continue
        if c.name in by_name:
            other = by_name[c.name]
            problems.append(
                Problem(
                    message=(
                        f"model-facing name {c.name!r} clashes with tool {other.contract.id!r} "
                        f"({other.source}); give one of them an explicit `name`"
                    ),
                    file=item.source,
                    tool=c.id,
                    pointer=item.pointer or None,
                )
            )
            continue
        by_id[c.id] = item
        by_name[c.name] = item
        for which in ("args_schema", "result_schema"):
            schema = getattr(c, which)
            if schema is not None:
                for problem in check_schema(schema, tool=c.id, file=item.source, where=which):
                    pointer = item.pointer + (problem.pointer or "")
                    problems.append(dataclasses.replace(problem, pointer=pointer))
    return by_id


def _document(
    config: ProjectConfig,
    tools: Mapping[str, LoadedTool],
    profiles: Mapping[str, Profile],
    agents: Mapping[str, Agent],
    catalog: list[CatalogEntry] | None = None,
    tests: list[ContextTest] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "kind": BUILD_KIND,
        "schema_version": BUILD_SCHEMA_VERSION,
        "requires_runtime": RUNTIME_V2 if tools else RUNTIME_V1,
        "project": {
            "name": config.name,
            "version": config.version,
            "description": config.description,
        },
        "tools": [
            {
                "contract": tools[tid].contract.canonical(),
                "digest": tools[tid].contract.digest,
                "source": tools[tid].source,
                "entrypoint": tools[tid].entrypoint,
            }
            for tid in sorted(tools)
        ],
        "profiles": {
            name: {"description": p.description, "tools": list(p.tools)}
            for name, p in sorted(profiles.items())
        },
        "agents": {name: _agent_doc(a) for name, a in sorted(agents.items())},
    }
    # Optional sections, absent when empty so tool-only Builds keep their digests.
    if catalog:
        doc["catalog"] = catalog_section(catalog)
    if tests:
        doc["tests"] = suite_section(tests)
    # Round-trip through canonical JSON so the stored document is exactly what is hashed.
    normalized: dict[str, Any] = json.loads(canonical_bytes(doc))
    normalized["digest"] = sha256_digest(normalized)
    return normalized


def build_project(root: str | os.PathLike[str]) -> Build:
    """Compile the project at ``root``; raise :class:`BuildError` listing every problem."""
    root_path = Path(root)
    config_path = root_path / PROJECT_FILE
    if not config_path.is_file():
        raise ProjectError(
            f"no {PROJECT_FILE} in {root_path} (create one with `charter init`)",
            file=PROJECT_FILE,
        )
    try:
        data = load_yaml(config_path, display=PROJECT_FILE)
    except ProjectError as exc:
        raise BuildError([exc.problem]) from None
    config, problems = parse_config(data)
    if config is None:
        raise BuildError(problems)
    loaded, found = load_tools(root_path, config.tools)
    problems.extend(found)
    tools = _check_tools(loaded, problems)
    ids = set(tools) | {t.contract.id for t in loaded}
    profiles = _resolve_profiles(config, ids, problems)
    agents = _resolve_agents(config, ids, problems)
    catalog, found = load_catalog(root_path)
    problems.extend(found)
    if not problems:
        contracts = {tid: t.contract for tid, t in tools.items()}
        problems.extend(
            validate_catalog(catalog, contracts, {n: p.tools for n, p in profiles.items()})
        )
    tests, found = load_test_dir(root_path, "tests")
    problems.extend(found)
    if problems:
        raise BuildError(sorted(problems, key=_problem_sort_key))
    return build_from_document(_document(config, tools, profiles, agents, catalog, tests))


def build_from_document(
    doc: Mapping[str, Any], *, supported_runtimes: Iterable[str] = SUPPORTED_RUNTIMES
) -> Build:
    """Verify a Build document (kind, runtime, digest) and turn it into a :class:`Build`."""
    if doc.get("kind") != BUILD_KIND:
        raise UserError("not a Charter Build (kind is not 'charter.build')")
    if doc.get("schema_version") != BUILD_SCHEMA_VERSION:
        raise UserError(
            f"Build schema_version {doc.get('schema_version')!r} is not supported "
            f"(this Charter reads {BUILD_SCHEMA_VERSION})"
        )
    supported = tuple(supported_runtimes)
    required = doc.get("requires_runtime")
    if not isinstance(required, str) or required not in supported:
        raise UnsupportedRuntimeError(str(required), supported)
    body = {k: v for k, v in doc.items() if k != "digest"}
    digest = sha256_digest(body)
    if doc.get("digest") != digest:
        raise UserError(
            f"Build digest mismatch: the document says {doc.get('digest')!r} but its content "
            f"hashes to {digest!r}; the file was modified after it was built"
        )
    tools = {}
    for entry in doc["tools"]:
        contract = ToolContract.model_validate(entry["contract"])
        if contract.digest != entry["digest"]:
            raise UserError(f"tool {contract.id!r}: contract digest does not match its content")
        tools[contract.id] = BuildTool(
            contract=contract, source=entry["source"], entrypoint=entry.get("entrypoint")
        )
    profiles = {
        name: Profile(name=name, description=p["description"], tools=tuple(p["tools"]))
        for name, p in doc["profiles"].items()
    }
    agents = {
        name: Agent(
            name=name,
            description=a["description"],
            instructions=a["instructions"],
            tools=tuple(a["tools"]),
            context_providers=tuple(a["context_providers"]),
            handoffs=tuple(a.get("handoffs", ())),
        )
        for name, a in doc["agents"].items()
    }
    project = doc["project"]
    return Build(
        digest=digest,
        project_name=project["name"],
        project_version=project["version"],
        description=project["description"],
        requires_runtime=required,
        tools=MappingProxyType(tools),
        profiles=MappingProxyType(profiles),
        agents=MappingProxyType(agents),
        document=MappingProxyType(dict(doc)),
    )


def load_build(
    path: str | os.PathLike[str], *, supported_runtimes: Iterable[str] = SUPPORTED_RUNTIMES
) -> Build:
    """Read and verify a Build file; refuses a Build that needs an unsupported runtime."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no Build at {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read Build {p}: {exc}") from None
    if not isinstance(doc, dict):
        raise UserError(f"{p} is not a Build document")
    return build_from_document(doc, supported_runtimes=supported_runtimes)


def build_filename(digest: str) -> str:
    return digest.replace(":", "-") + ".json"


def save_build(build: Build, root: str | os.PathLike[str], *, latest: bool = True) -> Path:
    """Write the Build under ``<root>/.charter/builds/`` atomically; record it as latest
    unless ``latest`` is false (a Build kept because calls were governed by it)."""
    directory = Path(root) / BUILDS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    if latest and (directory / LATEST_FILE).is_dir():  # os.replace cannot replace it
        raise _damaged(directory / LATEST_FILE, "it is a directory, not a file", remove=True)
    target = directory / build_filename(build.digest)
    if not target.exists():
        _atomic_write(target, build.to_json())
    if latest:
        _atomic_write(directory / LATEST_FILE, build.digest + "\n")
    return target


def keep_build(build: Build, project: str | os.PathLike[str]) -> None:
    """Keep the Build that will govern calls under ``.charter/builds/`` (not as latest), so
    that ``charter runs replay`` finds each context's pinned Build after the source changed.
    Best effort: a project directory that cannot be written to only loses that."""
    try:
        save_build(build, project, latest=False)
    except OSError as exc:
        logger.debug("could not keep Build %s under %s: %s", build.digest, project, exc)


class PinnedBuilds:
    """The Build of a digest a run's context was resolved under, for replaying it as it was
    governed: the Build file kept under ``<root>/.charter/builds/`` (every runtime opened on
    a project keeps the Build it compiled there), else the project's current source when it
    compiles to that digest. Each digest is looked up once."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.found: dict[str, Build] = {}
        self.current: Build | None = None

    def __call__(self, digest: str) -> Build:
        if digest in self.found:
            return self.found[digest]
        path = self.root / BUILDS_DIR / build_filename(digest)
        build = load_build(path) if path.is_file() else self.source()
        if build.digest != digest:
            raise UserError(
                f"the run was governed by Build {digest}, which is neither kept in "
                f"{self.root / BUILDS_DIR} nor what the project's source compiles to now "
                f"({build.digest}); replay it against a candidate with --build (latest, a "
                "digest or a Build file)"
            )
        self.found[digest] = build
        return build

    def source(self) -> Build:
        """The Build the project's source compiles to now (compiled once)."""
        if self.current is None:
            self.current = build_project(self.root)
        return self.current

    def agents(self) -> frozenset[str] | None:
        """The agent names of the project's current source (what a run's task roles are
        evaluated against), or None when it does not compile (then not checked)."""
        try:
            return frozenset(self.source().agents)
        except UserError:
            return None


def latest_build_path(root: str | os.PathLike[str]) -> Path:
    """The Build file ``<root>/.charter/builds/LATEST`` names. A missing pointer says to build
    first; a damaged one (a directory, unreadable, not UTF-8, empty, not a digest, naming a
    Build that is not there) is refused in one line naming the file, what is wrong with it
    and how to recover — never read as a path."""
    directory = Path(root) / BUILDS_DIR
    pointer = directory / LATEST_FILE
    try:
        data = pointer.read_bytes()
    except FileNotFoundError:
        raise UserError(f"no Build yet in {directory}; run `charter build` first") from None
    except IsADirectoryError:
        raise _damaged(pointer, "it is a directory, not a file", remove=True) from None
    except NotADirectoryError:
        raise  # .charter/builds is not a directory: the OS error names it (not the pointer)
    except OSError as exc:
        raise _damaged(pointer, f"it cannot be read ({exc.strerror or exc})") from None
    try:
        digest = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _damaged(pointer, "it is not UTF-8 text") from None
    if not digest:
        raise _damaged(pointer, "it is empty")
    if _DIGEST.fullmatch(digest) is None:
        raise _damaged(pointer, "it does not hold a Build digest (sha256: and 64 hex digits)")
    path = directory / build_filename(digest)
    if not path.is_file():
        raise _damaged(pointer, f"it names Build {digest}, which is not in {directory}")
    return path


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _damaged(pointer: Path, what: str, *, remove: bool = False) -> UserError:
    fix = "remove it and run `charter build`" if remove else "run `charter build` again"
    return UserError(f"{pointer} is damaged: {what}; {fix} to record the latest Build")


def resolve_build_path(ref: str, root: str | os.PathLike[str] = ".") -> Path:
    """A Build reference: a file path, a digest (``sha256:…`` or a unique hex prefix), or
    ``latest``."""
    if ref == "latest":
        return latest_build_path(root)
    path = Path(ref)
    if path.is_file():
        return path
    hexpart = ref.removeprefix("sha256:").removeprefix("sha256-")
    directory = Path(root) / BUILDS_DIR
    if hexpart and all(c in "0123456789abcdef" for c in hexpart) and directory.is_dir():
        matches = sorted(directory.glob(f"sha256-{hexpart}*.json"))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UserError(f"Build reference {ref!r} is ambiguous ({len(matches)} Builds match)")
    raise UserError(f"no Build found for {ref!r} (give a file, a digest, or 'latest')")


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
