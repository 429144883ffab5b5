"""Typed reading of a deployment file's YAML document: every error names the file and the
field (``charter.deploy.yaml: principals.app.tenant: is required``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from charter.deploy.secret_ref import _ENV_NAME, SecretRef
from charter.errors import ConfigError

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class _Reader:
    """Typed access to the YAML document with errors that name the file and the field."""

    def __init__(self, file: Path | str) -> None:
        self.file = file
        self.refs: list[SecretRef] = []  # every reference read: the redactor knows them all

    def fail(self, where: str, message: str) -> ConfigError:
        return ConfigError(
            f"{self.file}: {where}: {message}" if where else f"{self.file}: {message}"
        )

    def mapping(self, value: Any, where: str, allowed: frozenset[str]) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "must be a mapping")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(where, "keys must be strings")
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.fail(_join(where, key), f"unknown field (known: {known})")
        return value

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, "must be a non-empty string")
        return value

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, "must be true or false")
        return value

    def positive(self, value: Any, where: str, *, integer: bool = False) -> float:
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok or not value > 0 or value != value:
            kind = "a positive integer" if integer else "a positive number"
            raise self.fail(where, f"must be {kind}")
        return float(value)

    def names(self, value: Any, where: str, pattern: re.Pattern[str], what: str) -> frozenset[str]:
        if not isinstance(value, list):
            raise self.fail(where, f"must be a list of {what}s")
        out = set()
        for index, item in enumerate(value):
            if not isinstance(item, str) or not pattern.match(item):
                raise self.fail(f"{where}[{index}]", f"is not a valid {what}")
            out.add(item)
        return frozenset(out)

    def secret(self, value: Any, where: str, *, allow_hash: bool = False) -> SecretRef | str:
        """A ``{env: VAR}`` / ``{file: PATH}`` reference, or (API keys) a ``{sha256: HEX}``."""
        forms = "{env: VAR}, {file: PATH}" + (" or {sha256: HEX}" if allow_hash else "")
        if isinstance(value, str | int | float | bytes) and not isinstance(value, bool):
            raise self.fail(
                where,
                f"inline secrets are not allowed; give a reference instead: {forms}"
                " (the value was not echoed)",
            )
        allowed = frozenset({"env", "file", "sha256"} if allow_hash else {"env", "file"})
        if not isinstance(value, dict) or len(value) != 1:
            raise self.fail(where, f"must be exactly one of {forms}")
        self.mapping(value, where, allowed)
        ((kind, target),) = value.items()
        if kind == "sha256":
            if not isinstance(target, str) or not _HEX64.match(target):
                raise self.fail(_join(where, "sha256"), "must be 64 hexadecimal digits")
            return target.lower()
        if kind == "env":
            if not isinstance(target, str) or not _ENV_NAME.match(target):
                raise self.fail(_join(where, "env"), "must be an environment variable name")
            ref = SecretRef(env=target)
            self.refs.append(ref)
            return ref
        if not isinstance(target, str) or not target:
            raise self.fail(_join(where, "file"), "must be a file path")
        file = Path(target)
        if not file.is_absolute() and isinstance(self.file, Path):
            file = self.file.parent / file
        ref = SecretRef(file=file)
        self.refs.append(ref)
        return ref


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
