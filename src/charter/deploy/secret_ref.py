"""Secret references: an environment variable or a file, never the value itself.

A :class:`SecretRef` prints only where the secret comes from (``env:NAME`` / ``file:PATH``);
its value is read once, when the deployment is loaded, cached, and dropped on pickling.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from charter.errors import ConfigError

MIN_SECRET_BYTES = 16
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class SecretRef:
    """A reference to a secret: an environment variable or a file. Never prints the value.

    ``repr`` and ``str`` show only the reference (``env:CHARTER_LEDGER_KEY``). The value is
    read when the deployment is loaded (so a missing secret fails at start-up, naming the
    reference) and cached in the object; pickling drops it.
    """

    __slots__ = ("_env", "_file", "_value")

    def __init__(self, *, env: str | None = None, file: Path | str | None = None) -> None:
        if (env is None) == (file is None):
            raise ConfigError("a secret reference names exactly one of `env` or `file`")
        if env is not None and not _ENV_NAME.match(env):
            raise ConfigError(f"{env!r} is not an environment variable name")
        self._env = env
        self._file = Path(file) if file is not None else None
        self._value: bytes | None = None

    @property
    def env(self) -> str | None:
        return self._env

    @property
    def file(self) -> Path | None:
        return self._file

    @property
    def reference(self) -> str:
        """``env:NAME`` or ``file:PATH`` — safe to print."""
        return f"env:{self._env}" if self._env is not None else f"file:{self._file}"

    def load(self, env: Mapping[str, str] | None = None, *, what: str = "secret") -> bytes:
        """Read the value now (from ``env``, default ``os.environ``, or the file) and cache it.

        Errors name ``what`` and the reference, never the value.
        """
        source = os.environ if env is None else env
        if self._env is not None:
            raw = source.get(self._env)
            if raw is None:
                raise ConfigError(f"{what}: environment variable {self._env} is not set")
            value = raw.encode("utf-8", "surrogateescape")
        else:
            assert self._file is not None
            try:
                value = self._file.read_bytes()
            except FileNotFoundError:
                raise ConfigError(f"{what}: secret file {self._file} does not exist") from None
            except OSError as exc:
                raise ConfigError(
                    f"{what}: cannot read secret file {self._file}: {exc.strerror}"
                ) from None
            except ValueError:  # a NUL byte in the path: no file can be named so
                raise ConfigError(f"{what}: the secret file path contains a NUL byte") from None
            value = value.rstrip(b"\r\n")
        if len(value) < MIN_SECRET_BYTES:
            raise ConfigError(
                f"{what}: the secret in {self.reference} is shorter than {MIN_SECRET_BYTES} bytes"
            )
        self._value = value
        return value

    def resolve(self) -> bytes:
        """The secret's bytes: the value cached at load, else read now from the process."""
        if self._value is not None:
            return self._value
        return self.load()

    def key_id(self) -> str:
        """A short, stable, non-reversible id for this key (for ``hmac-sha256:<key-id>:``)."""
        digest = hashlib.sha256(b"charter.key-id\x00" + self.resolve()).hexdigest()
        return "k" + digest[:12]

    def __repr__(self) -> str:
        return f"SecretRef({self.reference})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretRef):
            return NotImplemented
        return (self._env, self._file) == (other._env, other._file)

    def __hash__(self) -> int:
        return hash((self._env, self._file))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_ref, (self._env, self._file))


def _rebuild_ref(env: str | None, file: Path | None) -> SecretRef:
    return SecretRef(env=env, file=file)
