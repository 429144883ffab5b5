"""Run context tests against a Build: offers, synthetic calls, executor compatibility.

Nothing is dispatched: calls are validated and authorized with :func:`charter.proof.decide`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from charter.kernel.principals import Principal, PrincipalKind
from charter.kernel.readiness_port import ToolReadiness
from charter.project.build import Build
from charter.project.suite import ContextTest
from charter.proof.decide import decide, offered, synthetic_context


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    name: str
    source: str
    passed: bool
    failures: tuple[str, ...] = ()
    origin: str = "own"  # own | inherited | guard
    digest: str | None = None  # the obligation's content address (promotion)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "origin": self.origin,
            "digest": self.digest,
            "passed": self.passed,
            "failures": list(self.failures),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteReport:
    results: tuple[CaseResult, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "total": len(self.results),
            "failed": len(self.failed),
            "results": [r.to_dict() for r in self.results],
        }


def run_test(
    build: Build,
    test: ContextTest,
    *,
    origin: str = "own",
    live: Mapping[str, ToolReadiness] | None = None,
) -> CaseResult:
    """``live``: the deployment's readiness (each bound tool's live ``describe``); with it,
    every executor entry that expects ``compatible`` is also checked against what the
    executor serving that tool actually reports."""
    spec = test.principal
    principal = Principal(
        name=spec.name,
        tenant=spec.tenant,
        kind=PrincipalKind(spec.kind),
        permissions=frozenset(spec.permissions),
        roles=frozenset(spec.roles),
    )
    failures: list[str] = []
    if test.profile not in build.profiles:
        failures.append(f"profile {test.profile!r} is not in the Build")
    if test.agent is not None and test.agent not in build.agents:
        failures.append(f"agent {test.agent!r} is not in the Build")
    ids = {c.id for c in offered(build, principal, test.profile, test.agent)}
    failures += [f"expected {t} to be offered; it is not" for t in test.offers if t not in ids]
    failures += [f"expected {t} not to be offered; it is" for t in test.not_offers if t in ids]
    ctx = synthetic_context(build, principal, test.profile, test.agent)
    for i, call in enumerate(test.calls):
        got = decide(build, ctx, principal, call.tool, call.arguments)
        want = (call.expect, call.code, call.reason)
        have = (
            got.status,
            got.code if call.code is not None else None,
            got.reason if call.reason is not None else None,
        )
        if want != have:
            failures.append(
                f"call {i} ({call.tool}): expected {call.expect}"
                + (f" {call.code}" if call.code else "")
                + (f" {call.reason}" if call.reason else "")
                + f", got {got.status} {got.code or ''} {got.reason or ''}".rstrip()
            )
    for ex in test.executors:
        tool = build.tools.get(ex.tool)
        ok = (
            tool is not None
            and tool.contract.version == ex.version
            and (ex.digest is None or ex.digest == tool.contract.digest)
        )
        if ("compatible" if ok else "incompatible") != ex.expect:
            failures.append(
                f"executor for {ex.tool} {ex.version}: expected {ex.expect}, "
                f"it is {'compatible' if ok else 'incompatible'}"
            )
        if live is not None and ex.expect == "compatible":
            failures += _live_failures(live.get(ex.tool), ex.tool, ex.version, ex.digest)
    return CaseResult(
        name=test.name,
        source=test.source,
        passed=not failures,
        failures=tuple(failures),
        origin=origin,
    )


def _live_failures(
    state: ToolReadiness | None, tool: str, version: str, digest: str | None
) -> list[str]:
    if state is None:
        return [f"live: no binding of the deployment serves {tool}"]
    out = []
    if state.reported_version is not None and state.reported_version != version:
        out.append(f"live: the executor for {tool} reports version {state.reported_version}")
    if digest is not None and state.reported_digest not in (None, digest):
        out.append(f"live: the executor for {tool} reports digest {state.reported_digest}")
    if not state.ready:
        out.append(f"live: the executor for {tool} is not ready ({state.reason}: {state.message})")
    return out


def run_tests(
    build: Build,
    tests: Iterable[ContextTest],
    *,
    origin: str = "own",
    live: Mapping[str, ToolReadiness] | None = None,
) -> SuiteReport:
    return SuiteReport(results=tuple(run_test(build, t, origin=origin, live=live) for t in tests))
