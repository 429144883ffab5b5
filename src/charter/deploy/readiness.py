"""Readiness: can each bound tool run as the Build says it should? (DESIGN §2, SEIF point 3)

A tool of the Build that no binding serves — no ``bindings:`` entry and no
``default_executor``, or only the default executor and no code for it (a YAML-declared tool
without an entrypoint, no function handed in) — is **not bound** (``TOOL_NOT_BOUND``): it is
never offered (profiles, MCP, HTTP contexts), never required, and blocks nothing.

For every tool the deployment binds:

- ``http`` — the executor's ``GET /describe`` must list the tool with exactly the Build's
  version and contract digest. Not ready: ``EXECUTOR_UNREACHABLE`` (no answer, 5xx, timeout),
  ``EXECUTOR_REFUSED`` (401/403: wrong credential or signing key), ``DESCRIBE_INVALID``,
  ``TOOL_NOT_DESCRIBED``, ``VERSION_MISMATCH``, ``DIGEST_MISMATCH``.
- ``mcp`` — the downstream MCP server must list the contract's ``upstream`` tool with the
  pinned digest over its name, description and input schema. Not ready: ``UPSTREAM_DRIFT``
  (the message names what changed), ``UPSTREAM_NOT_PINNED``, ``EXECUTOR_UNREACHABLE``,
  ``EXECUTOR_REFUSED`` (401/403: the server refused the binding's credential), ``EGRESS_REFUSED``.
- ``python`` / ``subprocess`` — the entrypoint file exists inside the project, parses, and
  defines the function (checked first without importing it), and the code reports the
  contract it declares, as the executor would run it: the in-process executor's function
  (imported once, as a call imports it), or a fresh worker process for ``subprocess``.
  A ``@charter.tool`` function reports its declared version and contract digest, which must
  equal the Build's — edit the decorator (say, version 2.0.0) and the tool is not ready until
  the project is rebuilt; a function that declares no contract (the implementation of a YAML
  contract) reports the Build's. Not ready: ``ENTRYPOINT_MISSING`` / ``ENTRYPOINT_INVALID``
  (also: the code fails to import, or its declaration is invalid), ``VERSION_MISMATCH``,
  ``DIGEST_MISMATCH``.

A report is cached for ``ttl_s`` seconds (default 5, the deployment's ``readiness.ttl_s``)
so resolving a context is not one network round trip per call; concurrent callers share one
refresh. Required tools that are not ready block context resolution (``TOOL_NOT_READY``);
optional ones are omitted.

Readiness is checked again before the intent of every remote call (and of every local call
whose code now declares another contract) (:meth:`Readiness.
check_call`, from the same cache), so a context resolved earlier does not keep trusting an
executor that has since changed: a remote tool whose executor now reports another version or
contract digest (or a downstream MCP tool that drifted) is refused before anything is
recorded or sent, ``transient_external`` / ``EXECUTOR_CONTRACT_CHANGED``; one that is not
ready for another reason, ``TOOL_NOT_READY``. An executor that answers a call with a signed
``409 CONTRACT_MISMATCH`` or an answer whose signature does not verify (or an MCP listing
that drifted at call time) drops the cache
(:meth:`Readiness.invalidate`), so the next call re-checks at once.
"""

from __future__ import annotations

import ast
import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from charter.contracts.model import ToolContract
from charter.deploy.deployment import Binding, Deployment
from charter.errors import Failure, TransientExternal
from charter.executors.http import Described, HttpEndpoint, HttpExecutor
from charter.kernel.readiness_port import ReadinessReport, ToolReadiness
from charter.project.build import Build

if TYPE_CHECKING:  # the kernel never imports the MCP SDK; the runtime hands the executor in
    from charter.executors.mcp import Drift, McpExecutor

EXECUTOR_UNREACHABLE = "EXECUTOR_UNREACHABLE"
VERSION_MISMATCH = "VERSION_MISMATCH"
DIGEST_MISMATCH = "DIGEST_MISMATCH"
TOOL_NOT_DESCRIBED = "TOOL_NOT_DESCRIBED"
ENTRYPOINT_MISSING = "ENTRYPOINT_MISSING"
ENTRYPOINT_INVALID = "ENTRYPOINT_INVALID"
EXECUTOR_MISSING = "EXECUTOR_MISSING"
UPSTREAM_DRIFT = "UPSTREAM_DRIFT"  # a downstream MCP tool's name, description or schema changed
UPSTREAM_NOT_PINNED = "UPSTREAM_NOT_PINNED"
EXECUTOR_CONTRACT_CHANGED = "EXECUTOR_CONTRACT_CHANGED"
TOOL_NOT_READY = "TOOL_NOT_READY"
TOOL_NOT_BOUND = "TOOL_NOT_BOUND"  # nothing serves the tool: not offered, blocks nothing
DEFAULT_TTL_S = 5.0
_REMOTE = frozenset({"http", "mcp"})
_LOCAL = ("python", "subprocess")
_CHANGED = frozenset({VERSION_MISMATCH, DIGEST_MISMATCH, TOOL_NOT_DESCRIBED, UPSTREAM_DRIFT})
_Keyed = tuple[str, bytes, bytes, str | None]


def _keyed(endpoint: HttpEndpoint) -> _Keyed:
    """What one describe checks: the URL and the binding's credential, key and CA."""
    return (endpoint.url, endpoint.credential, endpoint.signing_key, endpoint.ca)


def served_bindings(
    build: Build, deployment: Deployment, functions: Mapping[str, object] | None = None
) -> dict[str, Binding]:
    """The binding that serves each tool of ``build``; tools missing here are not bound.

    An explicit ``bindings:`` entry always counts (if its executor cannot serve the tool,
    readiness says why). The ``default_executor`` serves only tools that have code for it: an
    entrypoint (a ``@charter.tool`` function) or a function handed to the runtime."""
    handed = frozenset(functions or ())
    served: dict[str, Binding] = {}
    for tool_id, tool in build.tools.items():
        explicit = deployment.bindings.get(tool_id)
        if explicit is not None:
            served[tool_id] = explicit
            continue
        fallback = deployment.binding_for(tool_id)
        if fallback is None:
            continue
        if tool.entrypoint is not None or (fallback.executor == "python" and tool_id in handed):
            served[tool_id] = fallback
    return served


class Readiness:
    """Checks and caches the readiness of every bound tool of one Build."""

    def __init__(
        self,
        *,
        build: Build,
        bindings: Mapping[str, Binding],
        http: HttpExecutor | None = None,
        mcp: McpExecutor | None = None,
        root: Path | None = None,
        functions: frozenset[str] = frozenset(),
        ttl_s: float = DEFAULT_TTL_S,
        monotonic: Callable[[], float] = time.monotonic,
        executors: Mapping[str, Any] | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        """``executors``: the runtime's executors by kind; ``http`` and ``mcp`` are taken from
        it when not given, and ``python`` / ``subprocess`` report their code's contracts.
        ``redact`` scrubs every message (the deployment's redactor): a message may quote an
        MCP server's command line (a DSN, a key given as an argument) or what an executor
        answered, and reaches ``charter check``, the console, ``TOOL_NOT_READY`` answers and
        the audit file."""
        executors = executors or {}
        self._build = build
        self._bindings = dict(bindings)
        self._http = http if http is not None else executors.get("http")
        self._mcp = mcp if mcp is not None else executors.get("mcp")
        self._local = {k: executors[k] for k in _LOCAL if hasattr(executors.get(k), "describe")}
        self._root = root
        self._functions = functions
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._redact = redact
        self._cached: tuple[float, ReadinessReport] | None = None
        # the last report checked by check_call, its tools by id (a report is immutable)
        self._index: tuple[ReadinessReport, dict[str, ToolReadiness]] | None = None
        self._lock = asyncio.Lock()

    @property
    def bindings(self) -> Mapping[str, Binding]:
        return self._bindings

    async def report(self, *, fresh: bool = False) -> ReadinessReport:
        """The readiness of every bound tool; from the cache unless older than ``ttl_s``."""
        cached = self._cached
        if not fresh and cached is not None and self._monotonic() - cached[0] < self._ttl_s:
            return cached[1]
        async with self._lock:
            cached = self._cached
            if not fresh and cached is not None and self._monotonic() - cached[0] < self._ttl_s:
                return cached[1]
            report = await self._check()
            self._cached = (self._monotonic(), report)
            return report

    def invalidate(self, *_: object) -> None:
        """Forget the cached report: the next check asks every executor again."""
        self._cached = None

    async def check_call(self, contract: ToolContract) -> Failure | None:
        """Before a call's intent: ``None`` if ``contract``'s remote executor still serves it
        as the Build says, else the refusal (nothing has been recorded or sent yet)."""
        binding = self._bindings.get(contract.id)
        if binding is None or (binding.executor not in _REMOTE and binding.executor not in _LOCAL):
            return None
        report = await self.report()
        index = self._index
        if index is None or index[0] is not report:
            # first hit wins on a duplicate id, as ReadinessReport.get
            tools: dict[str, ToolReadiness] = {}
            for tool in report.tools:
                tools.setdefault(tool.tool_id, tool)
            index = self._index = (report, tools)
        state = index[1].get(contract.id)
        if state is None or state.ready:
            return None
        changed = state.reason in _CHANGED
        if binding.executor in _LOCAL and not changed:
            return None  # a local tool that fails to load fails its call (nothing was sent)
        what = (
            "its executor no longer serves the contract this Build has"
            if changed
            else "its executor is not ready"
        )
        return TransientExternal(
            f"tool {contract.id} was refused before dispatch: {what} ({state.reason}: "
            f"{state.message})",
            reason=EXECUTOR_CONTRACT_CHANGED if changed else TOOL_NOT_READY,
            details={
                "tool": contract.id,
                "readiness_reason": state.reason,
                "expected": {"version": state.expected_version, "digest": state.expected_digest},
                "reported": {"version": state.reported_version, "digest": state.reported_digest},
            },
            retryable=bool(contract.annotations.idempotent),
        )

    async def _check(self) -> ReadinessReport:
        # one describe per URL and keys: a binding sharing a URL with another but holding
        # its own credential, signing key or CA is checked with them, not the other's
        endpoints: dict[_Keyed, HttpEndpoint] = {}
        if self._http is not None:
            for tool_id, binding in self._bindings.items():
                endpoint = self._http.endpoints.get(tool_id)
                if binding.executor == "http" and endpoint is not None:
                    endpoints.setdefault(_keyed(endpoint), endpoint)
        described = dict(
            zip(
                endpoints,
                await asyncio.gather(*(self._describe(e) for e in endpoints.values())),
                strict=True,
            )
        )
        upstream = await self._upstream()
        declared = await self._declared()
        results = []
        for tool_id in sorted(self._build.tools):
            bound = self._bindings.get(tool_id)
            if bound is None:
                results.append(self._unbound(tool_id))
            elif bound.executor == "http":
                results.append(self._http_tool(tool_id, bound, described))
            elif bound.executor == "mcp":
                results.append(self._mcp_tool(tool_id, bound, upstream.get(tool_id)))
            else:
                results.append(self._local_tool(tool_id, bound, declared.get(tool_id)))
        return ReadinessReport(
            tools=tuple(results),
            checked_at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        )

    async def _describe(self, endpoint: HttpEndpoint) -> Described | Failure:
        assert self._http is not None
        try:
            return await self._http.describe(endpoint)
        except Failure as exc:
            return exc

    def _base(self, tool_id: str, binding: Binding, **kw: Any) -> ToolReadiness:
        contract = self._build.tools[tool_id].contract
        url = binding.options.get("url")
        if isinstance(kw.get("message"), str):
            kw["message"] = self._redact(kw["message"])
        return ToolReadiness(
            tool_id=tool_id,
            executor=binding.executor,
            endpoint=url if isinstance(url, str) else None,
            required=binding.required,
            expected_version=contract.version,
            expected_digest=contract.digest,
            **kw,
        )

    def _unbound(self, tool_id: str) -> ToolReadiness:
        contract = self._build.tools[tool_id].contract
        return ToolReadiness(
            tool_id=tool_id,
            executor="none",
            endpoint=None,
            required=False,
            ready=False,
            bound=False,
            expected_version=contract.version,
            expected_digest=contract.digest,
            reason=TOOL_NOT_BOUND,
            message=f"no binding in the deployment serves {tool_id}; it is not offered "
            f"(bind it: bindings: {{{tool_id}: {{executor: ...}}}})",
        )

    def _http_tool(
        self, tool_id: str, binding: Binding, described: Mapping[_Keyed, Described | Failure]
    ) -> ToolReadiness:
        endpoint = self._http.endpoints.get(tool_id) if self._http is not None else None
        if endpoint is None:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=EXECUTOR_MISSING,
                message="no http executor is configured for this binding",
            )
        found = described[_keyed(endpoint)]
        if isinstance(found, Failure):
            return self._base(
                tool_id, binding, ready=False, reason=found.reason, message=found.message
            )
        contract = self._build.tools[tool_id].contract
        tool = found.tools.get(tool_id)
        if tool is None:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=TOOL_NOT_DESCRIBED,
                message=f"executor {found.name} {found.version} does not describe {tool_id}",
            )
        reported: dict[str, Any] = {
            "reported_version": tool.version,
            "reported_digest": tool.contract_digest,
            "address": found.address,
        }
        if tool.version != contract.version:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=VERSION_MISMATCH,
                message=f"the executor serves version {tool.version}; the Build has "
                f"{contract.version}",
                **reported,
            )
        if tool.contract_digest != contract.digest:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=DIGEST_MISMATCH,
                message="the executor's contract digest differs from the Build's",
                **reported,
            )
        moved = None
        if found.previous_address is not None:
            moved = (
                f"the executor's address changed from {found.previous_address} to "
                f"{found.address}; pinned after a signed describe"
            )
        return self._base(tool_id, binding, ready=True, message=moved, **reported)

    async def _upstream(self) -> dict[str, Drift | Failure]:
        """Downstream MCP servers: each pinned tool that drifted, or why its server failed."""
        if self._mcp is None:
            return {}
        contracts = [
            self._build.tools[t].contract
            for t, b in self._bindings.items()
            if b.executor == "mcp" and t in self._build.tools
        ]
        return await self._mcp.readiness(contracts)

    def _mcp_tool(
        self, tool_id: str, binding: Binding, problem: Drift | Failure | None
    ) -> ToolReadiness:
        contract = self._build.tools[tool_id].contract
        if self._mcp is None or tool_id not in self._mcp.servers:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=EXECUTOR_MISSING,
                message="no mcp executor is configured for this binding",
            )
        if contract.upstream is None:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=UPSTREAM_NOT_PINNED,
                message="the contract pins no upstream tool (re-import it with charter import-mcp)",
            )
        if isinstance(problem, Failure):
            return self._base(
                tool_id, binding, ready=False, reason=problem.reason, message=problem.message
            )
        if problem is not None:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=UPSTREAM_DRIFT,
                message=problem.describe(),
                reported_digest=problem.current,
            )
        return self._base(
            tool_id,
            binding,
            ready=True,
            reported_version=contract.version,
            reported_digest=contract.digest,
        )

    async def _declared(self) -> dict[str, Mapping[str, Any]]:
        """What the code of each local tool declares now, asked of its executor."""
        asks = []
        for kind, executor in self._local.items():
            ids = sorted(
                t
                for t, b in self._bindings.items()
                if b.executor == kind and t in self._build.tools
            )
            if ids:
                asks.append(executor.describe(ids))
        out: dict[str, Mapping[str, Any]] = {}
        for answer in await asyncio.gather(*asks):
            out.update(answer)
        return out

    def _local_tool(
        self, tool_id: str, binding: Binding, declared: Mapping[str, Any] | None
    ) -> ToolReadiness:
        if tool_id in self._functions and binding.executor == "python":
            return self._declared_tool(tool_id, binding, declared)
        entrypoint = self._build.tools[tool_id].entrypoint
        if entrypoint is None or self._root is None:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=ENTRYPOINT_MISSING,
                message=f"tool {tool_id} has no Python entrypoint for the "
                f"{binding.executor} executor",
            )
        problem = _entrypoint_problem(self._root, entrypoint)
        if problem is not None:
            return self._base(
                tool_id, binding, ready=False, reason=ENTRYPOINT_INVALID, message=problem
            )
        return self._declared_tool(tool_id, binding, declared)

    def _declared_tool(
        self, tool_id: str, binding: Binding, declared: Mapping[str, Any] | None
    ) -> ToolReadiness:
        contract = self._build.tools[tool_id].contract
        if declared is None or (declared.get("version") is None and not declared.get("problem")):
            # no executor to ask, or code that declares no contract (a YAML contract's code)
            reported = {"reported_version": contract.version, "reported_digest": contract.digest}
            return self._base(tool_id, binding, ready=True, **reported)
        if declared.get("problem"):
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=ENTRYPOINT_INVALID,
                message=f"the tool's code cannot be loaded: {declared['problem']}",
            )
        version, digest = str(declared["version"]), str(declared["digest"])
        reported = {"reported_version": version, "reported_digest": digest}
        if version != contract.version:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=VERSION_MISMATCH,
                message=f"the tool's code declares version {version}; the Build has "
                f"{contract.version} (rebuild the project)",
                **reported,
            )
        if digest != contract.digest:
            return self._base(
                tool_id,
                binding,
                ready=False,
                reason=DIGEST_MISMATCH,
                message="the contract the tool's code declares differs from the Build's "
                "(rebuild the project)",
                **reported,
            )
        return self._base(tool_id, binding, ready=True, **reported)


def _entrypoint_problem(root: Path, entrypoint: str) -> str | None:
    """Why ``tools/x.py:fn`` cannot be loaded, judged without importing it; else ``None``."""
    relative, _, qualname = entrypoint.partition(":")
    path = (root / relative).resolve()
    try:
        path.relative_to(root.resolve())
    except ValueError:
        return f"{relative} is outside the project"
    try:
        tree = ast.parse(path.read_bytes(), filename=relative)
    except FileNotFoundError:
        return f"{relative} does not exist"
    except (OSError, SyntaxError, ValueError) as exc:
        return f"{relative} cannot be parsed: {type(exc).__name__}"
    top = qualname.split(".", 1)[0]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == top:
                return None
        elif _binds(node, top):
            return None
    return f"{relative} defines no {top}"


def _binds(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    if isinstance(node, ast.Import | ast.ImportFrom):
        return any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names)
    return False
