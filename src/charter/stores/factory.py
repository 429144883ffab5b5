"""Configuration → backend: store URLs and the ledger key.

Store URLs:

* ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the default is
  ``sqlite:///.charter/charter.db``, relative to the current directory);
* ``postgresql://user@host:port/db`` (or ``postgres://``), needs the ``postgres`` extra;
* ``memory:`` — a fresh in-memory store (tests, demos).

The ledger key never lives in the database. :func:`load_ledger_key` reads it from
``CHARTER_LEDGER_KEY`` (a value: hex or base64), else from the file named by
``CHARTER_LEDGER_KEY_FILE``, else from ``.charter/ledger.key`` (32 random bytes, created with
mode 0600 on first local use when ``create`` is true). A key *file* is read by
:func:`charter.ledger.chain.key_material` — its bytes, a trailing newline dropped — exactly
as the deployment's ``secrets.ledger_key: {file: PATH}`` is.
``CHARTER_LEDGER_KEY_ID`` optionally names the key; otherwise its id is derived from the
secret.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from charter.errors import ConfigError
from charter.ledger.chain import LedgerKey, key_material
from charter.ledger.clock import Clock, system_clock
from charter.ledger.lifecycle import NOTHING_IN_FLIGHT, InFlightCalls
from charter.ledger.ports import Store
from charter.stores.memory import MemoryStore
from charter.stores.sqlite import SQLiteStore

DEFAULT_STORE_URL = "sqlite:///.charter/charter.db"
LOCAL_KEY_PATH = Path(".charter") / "ledger.key"


def sqlite_path(url: str) -> Path:
    if not url.startswith("sqlite:///") or url == "sqlite:///":
        raise ConfigError(
            "a SQLite store URL looks like sqlite:///relative.db or sqlite:////abs.db"
        )
    return Path(url[len("sqlite:///") :])


@asynccontextmanager
async def open_store(
    url: str,
    *,
    key: LedgerKey,
    clock: Clock = system_clock,
    in_flight: InFlightCalls = NOTHING_IN_FLIGHT,
    must_exist: bool = False,
) -> AsyncIterator[Store]:
    """Open the store ``url`` names; ``must_exist`` refuses to create a new SQLite file."""
    options: dict[str, Any] = {"key": key, "clock": clock, "in_flight": in_flight}
    if url in ("memory:", "memory://"):
        store = MemoryStore(**options)
        try:
            yield store
        finally:
            await store.aclose()
    elif url.startswith("sqlite:"):
        path = sqlite_path(url)
        if must_exist and not path.exists():
            raise ConfigError(f"there is no Charter store at {path}")
        async with SQLiteStore.open(path, **options) as sqlite_store:
            yield sqlite_store
    elif url.startswith(("postgresql://", "postgres://")):
        try:
            from charter.stores.postgres import PostgresStore
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ConfigError(
                "PostgreSQL stores need the postgres extra: pip install -e '.[postgres]'"
            ) from exc
        async with PostgresStore.open(url, **options) as pg_store:
            yield pg_store
    else:
        raise ConfigError("store URLs start with sqlite:///, postgresql:// or memory:")


def _decode_value(text: bytes) -> bytes:
    """``CHARTER_LEDGER_KEY``'s value: hex, else base64, else the text itself."""
    text = text.strip()
    secret: bytes = text
    if text and all(c in b"0123456789abcdefABCDEF" for c in text) and len(text) % 2 == 0:
        secret = bytes.fromhex(text.decode("ascii"))
    elif text.isascii():
        try:
            secret = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            secret = text
    if len(secret) < 16:
        raise ConfigError("the ledger key from CHARTER_LEDGER_KEY is shorter than 16 bytes")
    return secret


def load_ledger_key(
    environ: Mapping[str, str] | None = None,
    *,
    base_dir: Path | None = None,
    create: bool = False,
) -> LedgerKey:
    """The configured ledger key (see the module docstring for where it comes from)."""
    env = os.environ if environ is None else environ
    key_id = env.get("CHARTER_LEDGER_KEY_ID")
    if env.get("CHARTER_LEDGER_KEY"):
        secret = _decode_value(env["CHARTER_LEDGER_KEY"].encode())
    else:
        named = env.get("CHARTER_LEDGER_KEY_FILE")
        path = Path(named) if named else (base_dir or Path.cwd()) / LOCAL_KEY_PATH
        if not path.exists() and not named and create:
            _create_key_file(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            if named:
                raise ConfigError(
                    f"CHARTER_LEDGER_KEY_FILE: cannot read the ledger key file {path}: "
                    f"{exc.strerror or type(exc).__name__}"
                ) from None
            raise ConfigError(
                f"no ledger key: set CHARTER_LEDGER_KEY or CHARTER_LEDGER_KEY_FILE "
                f"(looked for {path})"
            ) from None
        what = f"CHARTER_LEDGER_KEY_FILE ({path})" if named else str(path)
        secret = key_material(raw, what=what)
    return LedgerKey(key_id, secret) if key_id else LedgerKey.derive_id(secret)


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process created it first; use theirs
    try:
        os.write(fd, secrets.token_bytes(32))
        os.fsync(fd)
    finally:
        os.close(fd)
