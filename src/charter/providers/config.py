"""The ``chat:`` section of ``charter.deploy.yaml``: which provider answers, and the turn
settings (grace window, retention, budgets)::

    chat:
      provider: scripted            # scripted | openai | anthropic | none
      script: script.yaml           # scripted: the YAML script, relative to the deploy file
      model: gpt-4o-mini            # openai / anthropic: the model name
      base_url: http://127.0.0.1:8000/v1   # openai-compatible servers (vLLM, Ollama, LiteLLM)
      api_key_env: OPENAI_API_KEY   # the credential by reference: never in the file, never logged
      profile: copilot              # the profile chats use when the request names none
      agent: copilot                # the agent chats use when the request names none
      grace_s: 300                  # how long a turn outlives its disconnected client
      retention_days: 30            # idle conversations are deleted after this (ledger stays)
      max_rounds: 8                 # model rounds per turn (Charter's continuation bound)
      context_budget_bytes: 131072
      result_max_bytes: 65536
      history_bytes: 262144         # the newest messages a conversation keeps and sends

Without a ``chat:`` section (or with ``provider: none``) chats answer with one explanatory
delta. The network providers' SDKs are optional extras, imported only when configured.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from charter.errors import ConfigError
from charter.providers.base import Provider
from charter.providers.orchestrator import ChatSettings
from charter.providers.scripted import ScriptedProvider

_KEYS = frozenset(
    {
        "provider",
        "script",
        "model",
        "base_url",
        "api_key_env",
        "profile",
        "agent",
        "grace_s",
        "retention_days",
        "max_rounds",
        "context_budget_bytes",
        "result_max_bytes",
        "history_bytes",
        "max_tokens",
        "timeout_s",
    }
)
_ADAPTERS = {
    "openai": ("charter.providers.openai_compat", "OpenAICompatProvider"),
    "anthropic": ("charter.providers.anthropic", "AnthropicProvider"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatConfig:
    provider: Provider | None = None
    settings: ChatSettings = field(default_factory=ChatSettings)
    profile: str | None = None
    agent: str | None = None


def _number(doc: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}.{key} must be a positive number")
    return float(value)


def _text(doc: Mapping[str, Any], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}.{key} must be a string")
    return value


def parse_chat_config(doc: Any, *, base: Path, where: str = "chat") -> ChatConfig:
    """Parse the section; ``base`` is the directory relative paths start from."""
    if doc is None:
        return ChatConfig()
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where} must be a mapping")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}")
    settings = ChatSettings(
        grace_s=_number(doc, "grace_s", 300.0, where),
        retention_s=_number(doc, "retention_days", 30.0, where) * 24 * 3600.0,
        max_rounds=int(_number(doc, "max_rounds", 8, where)),
        context_budget_bytes=int(_number(doc, "context_budget_bytes", 128 * 1024, where)),
        result_max_bytes=int(_number(doc, "result_max_bytes", 64 * 1024, where)),
        history_bytes=int(_number(doc, "history_bytes", 256 * 1024, where)),
    )
    kind = _text(doc, "provider", where) or "none"
    provider: Provider | None
    if kind == "none":
        provider = None
    elif kind == "scripted":
        script = _text(doc, "script", where)
        if script is None:
            raise ConfigError(f"{where}.script is required for the scripted provider")
        provider = ScriptedProvider.from_file(base / script)
    elif kind in ("openai", "anthropic"):
        provider = network_provider(kind, doc, where=where)
    else:
        raise ConfigError(f"{where}.provider must be scripted, openai, anthropic or none")
    return ChatConfig(
        provider=provider,
        settings=settings,
        profile=_text(doc, "profile", where),
        agent=_text(doc, "agent", where),
    )


def network_provider(kind: str, doc: Mapping[str, Any], *, where: str = "chat") -> Provider:
    model = _text(doc, "model", where)
    if model is None:
        raise ConfigError(f"{where}.model is required for the {kind} provider")
    options = {
        "model": model,
        "base_url": _text(doc, "base_url", where),
        "api_key_env": _text(doc, "api_key_env", where),
        "max_tokens": int(_number(doc, "max_tokens", 1024, where)),
        "timeout_s": _number(doc, "timeout_s", 60.0, where),
    }
    # imported only when configured: each adapter's SDK is an optional extra
    module, name = _ADAPTERS[kind]
    adapter: Provider = getattr(importlib.import_module(module), name)(**options)
    return adapter


def load_chat_config(source: Path | None) -> ChatConfig:
    """The ``chat:`` section of the deployment file ``source`` (a path or None)."""
    if source is None or not source.is_file():
        return ChatConfig()
    doc = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    return parse_chat_config(doc.get("chat"), base=source.parent, where=f"{source}: chat")
