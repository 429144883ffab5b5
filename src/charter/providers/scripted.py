"""The scripted provider: a labelled, deterministic model driven by a YAML script.

A script is a list of rules; the first whose ``match`` (a regular expression, searched in
the user's message) matches drives the turn through its steps::

    rules:
      - match: "(?i)new workflow"
        steps:
          - say: "Reading the catalog."                 # a text delta
          - call: {id: cat, tool: activities_catalog, arguments: {}}
          - calls:                                      # parallel tool calls
              - {id: a, tool: instance_get, arguments: {instance_id: "i-1"}}
              - {id: b, tool: instance_get, arguments: {instance_id: "i-2"}}
          - say: "The catalog has {{cat.data.count}} activities."
          - error: rate_limited                         # a provider error
      - match: ""
        steps: [{say: "I only know scripted answers."}]

``{{ID.path}}`` reads an earlier tool result of the same turn (``status`` or ``data.…``); a
string that is exactly one template is replaced by the value itself (a dict stays a dict).
Everything it streams says ``provider: scripted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from charter.errors import ConfigError
from charter.providers.base import (
    SessionHandle,
    ToolInvocation,
    ToolInvoker,
    TurnRequest,
    request_tokens,
)
from charter.providers.events import (
    MessageCompleted,
    ModelRequested,
    ProviderError,
    ProviderEvent,
    TextDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnCompleted,
)

_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
_WORD = re.compile(r"\S+\s*")


def _lookup(results: Mapping[str, Any], path: str) -> Any:
    head, _, rest = path.partition(".")
    value: Any = results.get(head)
    for part in rest.split(".") if rest else ():
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def render(value: Any, results: Mapping[str, Any]) -> Any:
    """Fill ``{{ID.path}}`` templates in strings, lists and dicts."""
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value.strip())
        if whole:
            return _lookup(results, whole.group(1))

        def text(m: re.Match[str]) -> str:
            found = _lookup(results, m.group(1))
            return found if isinstance(found, str) else json.dumps(found, sort_keys=True)

        return _TEMPLATE.sub(text, value)
    if isinstance(value, list):
        return [render(v, results) for v in value]
    if isinstance(value, dict):
        return {k: render(v, results) for k, v in value.items()}
    return value


class ScriptedProvider:
    """A deterministic model for tests and demos (never a real model; labelled as such)."""

    name = "scripted"

    def __init__(self, rules: Sequence[Mapping[str, Any]]) -> None:
        self.rules = [dict(r) for r in rules]
        for index, rule in enumerate(self.rules):
            if not isinstance(rule.get("steps"), list):
                raise ConfigError(f"scripted rule {index} needs a list of steps")
            re.compile(str(rule.get("match", "")))

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedProvider:
        try:
            doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the script ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: the script is not valid UTF-8") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            raise ConfigError(f"{path}: the script is not valid YAML{at}") from None
        return cls.from_document(doc, where=str(path))

    @classmethod
    def from_document(cls, doc: Any, *, where: str = "script") -> ScriptedProvider:
        if not isinstance(doc, Mapping) or not isinstance(doc.get("rules"), list):
            raise ConfigError(f"{where}: a script is a mapping with a list of rules")
        return cls(doc["rules"])

    async def create_session(self, conversation_id: str) -> SessionHandle:
        return SessionHandle(provider=self.name, session_id=conversation_id)

    def _rule(self, request: TurnRequest) -> Mapping[str, Any] | None:
        users = [m.text for m in request.messages if m.role == "user"]
        last = users[-1] if users else ""
        for rule in self.rules:
            if re.search(str(rule.get("match", "")), last):
                return rule
        return None

    async def execute_turn(
        self, request: TurnRequest, invoker: ToolInvoker
    ) -> AsyncIterator[ProviderEvent]:
        rule = self._rule(request)
        results: dict[str, Any] = {}
        said: list[str] = []
        rounds = 1
        steps: list[Any] = list(rule["steps"]) if rule is not None else []
        if rule is None:
            steps = [{"say": "(scripted) no rule matches this message."}]
        names = tuple(t.name for t in request.tools)
        sent: list[Any] = [
            request.instructions,
            [(m.role, m.text) for m in request.messages],
            [(t.name, t.description, t.parameters) for t in request.tools],
        ]
        yield ModelRequested(tools=names, tokens=request_tokens(sent))
        for step in steps:
            if "say" in step:
                text = str(render(step["say"], results))
                for word in _WORD.findall(text) or [text]:
                    said.append(word)
                    yield TextDelta(text=word)
            elif "call" in step or "calls" in step:
                rounds += 1
                batch = [step["call"]] if "call" in step else list(step["calls"])
                if said:
                    yield MessageCompleted(text="".join(said))
                    said = []
                invocations = []
                for spec in batch:
                    args = json.dumps(render(spec.get("arguments", {}), results))
                    inv = ToolInvocation(call_id=str(spec["id"]), name=spec["tool"], arguments=args)
                    invocations.append(inv)
                    yield ToolCallRequested(
                        call_id=inv.call_id, name=inv.name, arguments=inv.arguments
                    )
                for inv in invocations:
                    outcome = await invoker.invoke(inv)
                    results[inv.call_id] = {"status": outcome.status, "data": outcome.data}
                    yield ToolResultReady(
                        call_id=inv.call_id,
                        name=inv.name,
                        status=outcome.status,
                        content=outcome.content,
                    )
                    sent.append([inv.arguments, outcome.content])
                yield ModelRequested(tools=names, tokens=request_tokens(sent))
            elif "error" in step:
                yield ProviderError(kind=str(step["error"]), detail="scripted error")
                return
        if said:
            yield MessageCompleted(text="".join(said))
        yield TurnCompleted(rounds=rounds)
