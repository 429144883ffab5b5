"""The ``policy:`` section of the deployment file: authorization knobs and scoped modes.

.. code-block:: yaml

    policy:
      max_danger: medium            # low | medium | high (default) | critical
      disable: [notes.purge]        # tools that never run here, read tools included
      agents:                       # per-agent enablement
        scout:
          enable: [notes.add]       # proposal and write tools this agent may run
          disable: [notes.search]   # tools this agent may not run
      ownership:                    # ownership hooks by import path, each under
        - owners:owns_note          # limits.policy_hook_deadline_ms (250 ms)
      modes:                        # enforce | observe | off, most specific first
        tools: {notes.search: observe}
        agents: {scout: observe}
        profiles: {trial: observe}
      observe_without_approval: [notes.add]   # in observe, these run without approval

An ownership hook is a function ``hook(inp) -> Denial | None`` (plain or ``async``) taking
a :class:`~charter.kernel.authorize.AuthorizationInput`; its ``arguments`` are a read-only
copy of the validated arguments. The module is imported with the project directory on
``sys.path`` when the runtime opens; an import path that does not resolve to a callable is a
``ConfigError`` naming the entry.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from charter.contracts.model import TOOL_ID, Danger
from charter.deploy.reader import _Reader
from charter.errors import ConfigError
from charter.kernel.authorize import Hook
from charter.kernel.settings import Mode, ModeScopes

_POLICY = frozenset(
    {"max_danger", "disable", "agents", "ownership", "modes", "observe_without_approval"}
)
_AGENT = frozenset({"enable", "disable"})
_MODES = frozenset({"tools", "agents", "profiles"})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
_HOOK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
_TOOL = re.compile(TOOL_ID.pattern)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    max_danger: Danger = Danger.HIGH
    disabled: frozenset[str] = frozenset()
    agent_enabled: Mapping[str, frozenset[str]] = field(default_factory=dict)
    agent_disabled: Mapping[str, frozenset[str]] = field(default_factory=dict)
    ownership: tuple[str, ...] = ()  # "module:function" import paths
    modes: ModeScopes = field(default_factory=ModeScopes)

    def describe(self) -> dict[str, Any]:
        return {
            "max_danger": self.max_danger.value,
            "disable": sorted(self.disabled),
            "agents": {
                name: {
                    "enable": sorted(self.agent_enabled.get(name, ())),
                    "disable": sorted(self.agent_disabled.get(name, ())),
                }
                for name in sorted({*self.agent_enabled, *self.agent_disabled})
            },
            "ownership": list(self.ownership),
            "modes": {
                "tools": {k: v.value for k, v in self.modes.tools.items()},
                "agents": {k: v.value for k, v in self.modes.agents.items()},
                "profiles": {k: v.value for k, v in self.modes.profiles.items()},
            },
            "observe_without_approval": sorted(self.modes.observe_without_approval),
        }


def _mode_map(r: _Reader, value: Any, where: str, pattern: re.Pattern[str]) -> dict[str, Mode]:
    section = value if value is not None else {}
    if not isinstance(section, dict):
        raise r.fail(where, "must be a mapping of names to enforce, observe or off")
    out: dict[str, Mode] = {}
    for name, raw in section.items():
        if not isinstance(name, str) or not pattern.match(name):
            raise r.fail(where, f"{name!r} is not a valid name")
        try:
            out[name] = Mode(raw)
        except ValueError:
            raise r.fail(f"{where}.{name}", "must be one of enforce, observe, off") from None
    return out


def parse_policy(r: _Reader, value: Any) -> PolicySettings:
    """Validate the ``policy:`` section (every error names the file and the field)."""
    if value is None:
        return PolicySettings()
    doc = r.mapping(value, "policy", _POLICY)
    max_danger = Danger.HIGH
    if "max_danger" in doc:
        try:
            max_danger = Danger(doc["max_danger"])
        except ValueError:
            raise r.fail(
                "policy.max_danger", "must be one of low, medium, high, critical"
            ) from None
    disabled: frozenset[str] = frozenset()
    if doc.get("disable") is not None:
        disabled = r.names(doc["disable"], "policy.disable", _TOOL, "tool id")
    enabled_by: dict[str, frozenset[str]] = {}
    disabled_by: dict[str, frozenset[str]] = {}
    agents = doc.get("agents") or {}
    if not isinstance(agents, dict):
        raise r.fail("policy.agents", "must be a mapping of agent names")
    for agent, spec in agents.items():
        where = f"policy.agents.{agent}"
        if not isinstance(agent, str) or not _NAME.match(agent):
            raise r.fail(where, "is not a valid agent name")
        section = r.mapping(spec if spec is not None else {}, where, _AGENT)
        if section.get("enable") is not None:
            enabled_by[agent] = r.names(section["enable"], f"{where}.enable", _TOOL, "tool id")
        if section.get("disable") is not None:
            disabled_by[agent] = r.names(section["disable"], f"{where}.disable", _TOOL, "tool id")
    ownership: list[str] = []
    hooks = doc.get("ownership") or []
    if not isinstance(hooks, list):
        raise r.fail("policy.ownership", "must be a list of module:function import paths")
    for index, item in enumerate(hooks):
        if not isinstance(item, str) or not _HOOK.match(item):
            raise r.fail(
                f"policy.ownership[{index}]", "must be an import path like package.module:function"
            )
        ownership.append(item)
    modes_doc = r.mapping(doc.get("modes") or {}, "policy.modes", _MODES)
    unapproved: frozenset[str] = frozenset()
    if doc.get("observe_without_approval") is not None:
        unapproved = r.names(
            doc["observe_without_approval"], "policy.observe_without_approval", _TOOL, "tool id"
        )
    modes = ModeScopes(
        tools=MappingProxyType(_mode_map(r, modes_doc.get("tools"), "policy.modes.tools", _TOOL)),
        agents=MappingProxyType(
            _mode_map(r, modes_doc.get("agents"), "policy.modes.agents", _NAME)
        ),
        profiles=MappingProxyType(
            _mode_map(r, modes_doc.get("profiles"), "policy.modes.profiles", _NAME)
        ),
        observe_without_approval=unapproved,
    )
    return PolicySettings(
        max_danger=max_danger,
        disabled=disabled,
        agent_enabled=MappingProxyType(enabled_by),
        agent_disabled=MappingProxyType(disabled_by),
        ownership=tuple(ownership),
        modes=modes,
    )


def load_hooks(
    policy: PolicySettings, project_dir: Path | None, *, source: Any
) -> tuple[Hook, ...]:
    """Import the ownership hooks the deployment names (project directory on ``sys.path``)."""
    hooks: list[Hook] = []
    entry = str(project_dir.resolve()) if project_dir is not None else None
    for index, path in enumerate(policy.ownership):
        where = f"{source or 'deployment'}: policy.ownership[{index}]"
        module_name, _, attribute = path.partition(":")
        added = entry is not None and entry not in sys.path
        if added:
            sys.path.insert(0, entry)  # type: ignore[arg-type]
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ConfigError(
                f"{where}: cannot import module {module_name!r} ({type(exc).__name__})"
            ) from None
        finally:
            if added:
                with suppress(ValueError):
                    sys.path.remove(entry)  # type: ignore[arg-type]
        hook = getattr(module, attribute, None)
        if not callable(hook):
            raise ConfigError(f"{where}: {module_name} has no function {attribute!r}")
        hooks.append(hook)
    return tuple(hooks)
