"""psycopg and pool errors onto the store error family: every psycopg exception is translated
here, for the ledger store and its conversations.

A store URL may hold a password (``postgresql://user:PASSWORD@host/db`` or
``?password=PASSWORD``) and libpq quotes the whole URI in some of its errors (a malformed
one). :func:`mask_url` and :func:`scrub` take the password out of a URL and out of any text
that quotes it; :data:`LOG_SCRUB` does the same to every record psycopg and its pool log.
"""

from __future__ import annotations

import contextlib
import logging
import re
import urllib.parse
from collections.abc import Iterable, Iterator

import psycopg
import psycopg.errors
from psycopg_pool import PoolTimeout

from charter.errors import CharterError, ConfigError, StoreConflict, StoreError
from charter.stores._sql import unencodable_key

MASK = "***"
# A URL's userinfo password: scheme://user:PASSWORD@ (up to the authority's last '@', as a
# password with a raw '@' in it would otherwise leave its tail behind).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s\"']*:)[^/\s\"']*@")
# A password given as a query or conninfo parameter: password=PASSWORD.
_PARAM = re.compile(r"(?i)\b(password=)[^&\s\"']*")
_MIN_LITERAL = 4  # shorter passwords are scrubbed only where they sit in a URL


def mask_url(url: str) -> str:
    """``url`` with its password (userinfo or ``password=`` parameter) replaced by ``***``."""
    return _PARAM.sub(r"\1" + MASK, _USERINFO.sub(r"\1" + MASK + "@", url))


def url_secrets(url: str) -> tuple[str, ...]:
    """The passwords ``url`` holds, as written and percent-decoded."""
    found: list[str] = []
    userinfo = _USERINFO.search(url)
    if userinfo is not None:
        found.append(userinfo.group(0)[len(userinfo.group(1)) : -1])
    found.extend(m.group(0)[len(m.group(1)) :] for m in _PARAM.finditer(url))
    decoded = [urllib.parse.unquote(s) for s in found]
    return tuple(s for s in dict.fromkeys([*found, *decoded]) if s)


def scrub(text: str, urls: Iterable[str] = ()) -> str:
    """``text`` without the password of any URL in it, nor any password of ``urls``."""
    for url in urls:
        text = text.replace(url, mask_url(url))
    text = mask_url(text)
    for url in urls:
        for secret in sorted(url_secrets(url), key=len, reverse=True):
            if len(secret) >= _MIN_LITERAL:
                text = text.replace(secret, MASK)
    return text


class PsycopgLogScrub(logging.Filter):
    """Takes store passwords out of the records psycopg and psycopg_pool log (the pool's
    "error connecting in 'pool-1': ... in URI: ..." quotes the whole URI). Installed on their
    loggers, so it applies whatever handler prints the record (the CLI's last-resort one, the
    server's JSON one)."""

    LOGGERS = ("psycopg", "psycopg.pool", "psycopg_pool.sched", "psycopg_pool.sched_async")

    def __init__(self) -> None:
        super().__init__()
        self._urls: dict[str, int] = {}

    def learn(self, url: str) -> None:
        self._urls[url] = self._urls.get(url, 0) + 1

    def forget(self, url: str) -> None:
        left = self._urls.get(url, 0) - 1
        if left > 0:
            self._urls[url] = left
        else:
            self._urls.pop(url, None)

    def install(self) -> None:
        for name in self.LOGGERS:
            target = logging.getLogger(name)
            if self not in target.filters:
                target.addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        urls = list(self._urls)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep only its template
            message = str(record.msg)
        record.msg, record.args = scrub(message, urls), ()
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = scrub(text, urls)
        return True


LOG_SCRUB = PsycopgLogScrub()
LOG_SCRUB.install()


def connect_failure(exc: BaseException, url: str) -> CharterError:
    """The first connection to ``url`` failed: the real reason, the password masked. A URL
    libpq cannot read is a configuration error; anything else (refused, unknown host, no such
    role or database, bad password) a retryable STORE_UNAVAILABLE."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    why = scrub(first, [url])
    where = mask_url(url)
    if isinstance(exc, psycopg.ProgrammingError):
        return ConfigError(f"the PostgreSQL store URL {where} is not valid: {why}")
    if isinstance(exc, TimeoutError):
        why = "no answer in time"
    return StoreError(
        f"postgres: cannot connect to {where}: {why}",
        reason="STORE_UNAVAILABLE",
        retryable=True,
    )


_STORAGE_FAILURES = (
    psycopg.errors.IoError,
    psycopg.errors.DiskFull,
    psycopg.errors.DataCorrupted,
    psycopg.errors.IndexCorrupted,
)


def translate_psycopg_error(exc: BaseException) -> StoreError:
    """Map a psycopg (or pool) exception onto the store error family."""
    name = type(exc).__name__
    if isinstance(exc, psycopg.errors.IntegrityError):
        return StoreConflict(f"postgres: uniqueness or integrity rule violated ({name})")
    if isinstance(exc, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return StoreError(f"postgres: {name}", reason="STORE_BUSY", retryable=True)
    if isinstance(exc, _STORAGE_FAILURES):
        # The server's storage failed (I/O error, full disk, damaged data): fail-stop.
        return StoreError(f"postgres: {name}: the server's storage failed", reason="STORE_FAILED")
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        return StoreError(f"postgres: {name}", reason="STORE_UNAVAILABLE", retryable=True)
    return StoreError(f"postgres: {name}")


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Raise any psycopg or pool error as the store error family."""
    try:
        yield
    except CharterError:
        raise
    except UnicodeEncodeError:  # a caller's id with a lone surrogate, sent as a parameter
        raise unencodable_key() from None
    except psycopg.DataError as exc:
        if _NUL in str(exc):  # psycopg refuses to send a NUL in a text parameter
            raise unencodable_key() from None
        raise translate_psycopg_error(exc) from None
    except (psycopg.Error, PoolTimeout) as exc:
        raise translate_psycopg_error(exc) from None


_NUL = "cannot contain NUL (0x00) bytes"
