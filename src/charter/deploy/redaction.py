"""The deployment file's ``redaction:`` section, and the secrets a deployment references.

``redaction: {keys: [...], patterns: [...], values: [{env: V} | {file: P}, ...]}`` adds key
names, RE2 patterns and secret values (by reference) to the redactor; every credential the
deployment names is registered too (:func:`known_secrets`). See docs/privacy.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.deploy.secret_ref import SecretRef
from charter.errors import ConfigError
from charter.kernel.redaction import RedactionSettings, Redactor, normalize_key

_REDACTION = frozenset({"keys", "patterns", "values"})


def known_secrets(deployment: Any) -> frozenset[str]:
    """The values of every secret this deployment references, for redaction.

    Each is scrubbed from every text Charter stores, streams or logs (with the
    ``redaction.values``); values that are not UTF-8 text are skipped.
    """
    refs = {*deployment.secret_refs, *deployment.redaction.values}
    for ref in (deployment.fingerprint_key, deployment.ledger_key, deployment.approval_token):
        if ref is not None:
            refs.add(ref)
    for binding in deployment.bindings.values():
        refs.update(v for v in binding.options.values() if isinstance(v, SecretRef))
    out = set()
    for ref in refs:
        try:
            out.add(ref.resolve().decode("utf-8"))
        except (UnicodeDecodeError, ConfigError):
            continue
    return frozenset(out)


def sections_secrets(
    doc: Mapping[str, Any], r: Any, env: Mapping[str, str]
) -> tuple[SecretRef, ...]:
    """Secret references of the sections other modules parse: the server's ``jwt.secret``
    (and ``jwt.public_key``) and the chat provider's ``api_key_env``. Each is read now where
    it can be; one that cannot (unset, too short) is left to its own module to report."""
    wanted: list[tuple[str, Any]] = []
    jwt = doc.get("jwt")
    if isinstance(jwt, Mapping):
        wanted += [(f"jwt.{k}", jwt[k]) for k in ("secret", "public_key") if k in jwt]
    chat = doc.get("chat")
    if isinstance(chat, Mapping) and isinstance(chat.get("api_key_env"), str):
        wanted.append(("chat.api_key_env", {"env": chat["api_key_env"]}))
    refs = []
    for where, value in wanted:
        try:
            ref = r.secret(value, where)
            if isinstance(ref, SecretRef):
                ref.load(env, what=where)
                refs.append(ref)
        except ConfigError:
            continue
    return tuple(refs)


def parse_redaction(r: Any, value: Any, env: Mapping[str, str]) -> RedactionSettings:
    """``redaction: {keys: [...], patterns: [...], values: [{env: V} | {file: P}, ...]}``."""
    if value is None:
        return RedactionSettings()
    section = r.mapping(value, "redaction", _REDACTION)
    lists: dict[str, list[Any]] = {}
    for key in _REDACTION:
        item = section.get(key, [])
        if not isinstance(item, list):
            raise r.fail(f"redaction.{key}", "must be a list")
        lists[key] = item
    keys = []
    for index, name in enumerate(lists["keys"]):
        if not isinstance(name, str) or not normalize_key(name):
            raise r.fail(f"redaction.keys[{index}]", "must be a key name with a letter or digit")
        keys.append(name)
    patterns = []
    for index, source in enumerate(lists["patterns"]):
        if not isinstance(source, str) or not source:
            raise r.fail(f"redaction.patterns[{index}]", "must be a non-empty string")
        try:
            Redactor(patterns=[source])
        except ConfigError:
            raise r.fail(
                f"redaction.patterns[{index}]",
                "is not a valid RE2 expression (RE2 has no backreferences or lookaround)",
            ) from None
        patterns.append(source)
    values = []
    for index, item in enumerate(lists["values"]):
        where = f"redaction.values[{index}]"
        ref = r.secret(item, where)
        assert isinstance(ref, SecretRef)
        ref.load(env, what=f"{r.file}: {where}")
        values.append(ref)
    return RedactionSettings(keys=tuple(keys), patterns=tuple(patterns), values=tuple(values))
