"""Redaction: what leaves the kernel never carries a secret (Elsa's and ChemSpace's rules).

Three rules, applied together by :class:`Redactor`:

1. **Pointers** — the contract's ``redact`` JSON pointers: the value there is replaced whole.
2. **Key names** — at any depth, a key whose name, lower-cased with every non-alphanumeric
   character removed, contains ``password``, ``passwd``, ``secret``, ``token``, ``apikey``,
   ``authorization``, ``connectionstring``, ``credential`` or ``privatekey`` has its value
   replaced whole (``API_KEY``, ``api-key``, ``Api Key``, ``x-auth-token``, ``clientSecret``,
   ``connection_string`` all match). Containment errs on the side of hiding: ``max_tokens``
   is redacted too.
3. **Patterns** — configured regular expressions, compiled with RE2 (linear time: a pattern
   cannot hang), replace what they match inside every string.

Values found under rules 1 and 2 are also *secret values*: :meth:`Redactor.secret_values`
collects them, and a redactor that :meth:`~Redactor.remember`\\ s them scrubs them out of
free text — an exception message, a log line, a result string — even where the key name is
innocent. The kernel does, per call::

    redactor = base.with_pointers(contract.redact)
    redactor = redactor.remember(redactor.secret_values(arguments))
    envelope_data = redactor.redact(result)
    message = redactor.redact_text(str(exc))

Redactors are immutable; every method returns new values and never mutates its input.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import re2

from charter.errors import ConfigError

REDACTED = "[REDACTED]"
SENSITIVE_WORDS: tuple[str, ...] = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "connectionstring",
    "credential",
    "privatekey",
)
MIN_SCRUB_LENGTH = 4  # shorter remembered values are not scrubbed from text (too common)
_NON_ALNUM = re.compile(r"[^0-9a-z]")
_POINTER = re.compile(r"^(?:/(?:[^~/]|~[01])*)*$")

# Free-text forms: ``password=...``, ``"token": "..."``, ``Authorization: Bearer ...``.
_TEXT_RULES: tuple[tuple[Any, str], ...] = (
    (
        re2.compile(
            r"(?i)((?:password|passwd|secret|token|api[_ -]?key|authorization|"
            r"connection[_ -]?string|credentials?|private[_ -]?key)[\"']?\s*[:=]\s*[\"']?)"
            r"(?:bearer\s+|basic\s+)?([^\s\"',;&]+)"
        ),
        r"\1" + REDACTED,
    ),
    (re2.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
)


# Every word the text rules can match, folded: a text containing none of them cannot match,
# so the rules are skipped (str.casefold covers RE2's (?i) folding, e.g. the long s).
_TEXT_TRIGGERS = (
    "pass",
    "secret",
    "token",
    "api",
    "auth",
    "connection",
    "credential",
    "private",
    "bearer",
    "basic",
)


def normalize_key(key: str) -> str:
    """``"X-Auth_Token"`` → ``"xauthtoken"``: lower case, letters and digits only."""
    return _NON_ALNUM.sub("", key.casefold())


@functools.lru_cache(maxsize=4096)
def is_sensitive_key(key: str) -> bool:
    """True if a value under this key name is always redacted."""
    norm = normalize_key(key)
    return any(word in norm for word in SENSITIVE_WORDS)


def parse_pointer(pointer: str) -> tuple[str, ...]:
    """RFC 6901: ``"/a/b~1c"`` → ``("a", "b/c")``."""
    if not _POINTER.match(pointer):
        raise ConfigError(f"{pointer!r} is not a JSON pointer (e.g. /password)")
    if pointer == "":
        return ()
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:])


class _Trie:
    """The contract's pointers as a tree of tokens; ``end`` marks a redacted location."""

    __slots__ = ("children", "end")

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.end = False

    def add(self, tokens: tuple[str, ...]) -> None:
        node = self
        for token in tokens:
            node = node.children.setdefault(token, _Trie())
        node.end = True


class _HasContract(Protocol):
    @property
    def redact(self) -> tuple[str, ...]: ...


class _Request(Protocol):
    """What :meth:`Redactor.message_redactor` needs of an executor request."""

    @property
    def contract(self) -> _HasContract: ...

    @property
    def arguments(self) -> Mapping[str, Any]: ...


class Redactor:
    """Redacts JSON values and free text. Immutable."""

    __slots__ = ("_patterns", "_pointers", "_sources", "_trie", "_values")

    def __init__(
        self,
        *,
        pointers: Iterable[str] = (),
        patterns: Iterable[str] = (),
        values: Iterable[str] = (),
    ) -> None:
        self._pointers = tuple(sorted(set(pointers)))
        self._trie = _Trie()
        for pointer in self._pointers:
            self._trie.add(parse_pointer(pointer))
        self._sources = tuple(dict.fromkeys(patterns))
        compiled = []
        for index, source in enumerate(self._sources):
            try:
                compiled.append(re2.compile(source))
            except re2.error:
                raise ConfigError(
                    f"redaction pattern #{index + 1} is not a valid RE2 expression "
                    "(RE2 has no backreferences or lookaround)"
                ) from None
        self._patterns: tuple[Any, ...] = tuple(compiled)
        # longest first, so a value that contains another is replaced whole
        self._values = tuple(
            sorted({v for v in values if len(v) >= MIN_SCRUB_LENGTH}, key=lambda v: (-len(v), v))
        )

    def __repr__(self) -> str:
        return (
            f"Redactor(pointers={list(self._pointers)!r}, patterns={len(self._sources)}, "
            f"remembered={len(self._values)})"
        )

    @property
    def pointers(self) -> tuple[str, ...]:
        return self._pointers

    def _copy(self, *, pointers: Iterable[str], values: Iterable[str]) -> Redactor:
        new = Redactor.__new__(Redactor)
        new._pointers = tuple(sorted(set(pointers)))
        new._trie = _Trie()
        for pointer in new._pointers:
            new._trie.add(parse_pointer(pointer))
        new._sources = self._sources
        new._patterns = self._patterns
        new._values = tuple(
            sorted({v for v in values if len(v) >= MIN_SCRUB_LENGTH}, key=lambda v: (-len(v), v))
        )
        return new

    def with_pointers(self, pointers: Iterable[str]) -> Redactor:
        """This redactor plus a contract's ``redact`` pointers."""
        return self._copy(pointers=(*self._pointers, *pointers), values=self._values)

    def remember(self, values: Iterable[str]) -> Redactor:
        """A redactor that also scrubs these exact strings out of every text and string leaf."""
        return self._copy(pointers=self._pointers, values=(*self._values, *values))

    # -- values ---------------------------------------------------------------------------

    def redact(self, value: Any) -> Any:
        """A redacted copy of a JSON-like value (dicts, lists, tuples, scalars)."""
        return self._redact(value, self._trie)

    def _redact(self, value: Any, node: _Trie | None) -> Any:
        if node is not None and node.end:
            return REDACTED
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str) and is_sensitive_key(key):
                    out[key] = REDACTED
                else:
                    child = node.children.get(str(key)) if node is not None else None
                    out[key] = self._redact(item, child)
            return out
        if isinstance(value, list | tuple):
            items = [
                self._redact(item, node.children.get(str(i)) if node is not None else None)
                for i, item in enumerate(value)
            ]
            return items if isinstance(value, list) else tuple(items)
        return value

    def secret_values(self, value: Any) -> frozenset[str]:
        """Every string (and number, as text) that :meth:`redact` would hide whole."""
        found: set[str] = set()
        self._collect(value, self._trie, False, found)
        return frozenset(found)

    def _collect(self, value: Any, node: _Trie | None, hidden: bool, found: set[str]) -> None:
        hidden = hidden or (node is not None and node.end)
        if isinstance(value, str):
            if hidden:
                found.add(value)
            return
        if isinstance(value, int | float) and not isinstance(value, bool):
            if hidden:
                found.add(str(value))
            return
        if isinstance(value, Mapping):
            for key, item in value.items():
                child = node.children.get(str(key)) if node is not None else None
                sensitive = isinstance(key, str) and is_sensitive_key(key)
                self._collect(item, child, hidden or sensitive, found)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                child = node.children.get(str(i)) if node is not None else None
                self._collect(item, child, hidden, found)

    # -- text -----------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """Scrub remembered values, configured patterns and ``key=value`` secrets from text."""
        for secret in self._values:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pattern in self._patterns:
            text = pattern.sub(REDACTED, text)
        folded = text.casefold()
        if any(word in folded for word in _TEXT_TRIGGERS):
            for rule, replacement in _TEXT_RULES:
                text = rule.sub(replacement, text)
        return str(text)

    def scrub(self, text: str, values: Iterable[str] = ()) -> str:
        """:meth:`redact_text` with extra ``values`` to scrub, for this text only."""
        return self.remember(values).redact_text(text)

    def message_redactor(self) -> Callable[[str, _Request], str]:
        """The callback executors take: scrubs a message about one request.

        It applies this redactor plus the request contract's pointers, and scrubs the values
        of the request's sensitive arguments (by pointer or key name) out of the text.
        """

        def redact_message(text: str, request: _Request) -> str:
            redactor = self.with_pointers(request.contract.redact)
            return redactor.scrub(text, redactor.secret_values(request.arguments))

        return redact_message
