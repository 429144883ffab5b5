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

A remembered value is scrubbed in every form it is commonly re-encoded in — percent-encoded
(``quote``/``quote_plus``), base64 (standard and URL-safe, alone or inside a longer base64
text at any byte alignment) and JSON-escaped (``\\uXXXX``) — and from object keys as well
as values. A text that still holds a remembered value once its percent or ``\\u`` escapes
are decoded (a mixed or lower-case escaping) is replaced whole: redaction fails closed.
:class:`StreamRedactor` applies the same rules to text that arrives in pieces, and
:class:`RedactingLogFilter` to log records.

Redactors are immutable; every method returns new values and never mutates its input.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import logging
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import re2

from charter.errors import ConfigError, InvalidInput

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
    # a command line's option and its value: ``--api-key VALUE``, ``--db-password VALUE``
    # (an MCP server's argv quoted in a readiness message)
    (
        re2.compile(
            r"(?i)((?:^|\s)--?[a-z0-9_-]*(?:password|passwd|secret|token|api[_-]?key|"
            r"authorization|connection[_-]?string|credentials?|private[_-]?key)[a-z0-9_-]*\s+)"
            r"[^\s\"',;&-][^\s\"',;&]*"
        ),
        r"\1" + REDACTED,
    ),
)


# A URL's userinfo password, ``scheme://user:PASSWORD@host`` (a driver's error quoting its
# DSN, an HTTP client logging its request URL): the password goes, the scheme, user, host,
# port and path stay. Up to the authority's last '@', as a raw '@' in a password would
# otherwise leave its tail behind. A store URL masked already (stores/postgres_errors.py:
# ``postgresql://user:***@host/db``) is kept as it is.
_URL_PASSWORD = re2.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/?#@:\"'<>]*:)([^\s/\"'<>]+)@")
_URL_MASKS = frozenset({"***", REDACTED})


def _url_password(match: Any) -> str:
    if match.group(2) in _URL_MASKS:
        return str(match.group(0))
    return f"{match.group(1)}{REDACTED}@"


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


_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
MIN_BASE64_CORE = 8  # shorter secrets are matched in base64 only when encoded alone


def _b64_cores(raw: bytes, encode: Callable[[bytes], bytes]) -> list[str]:
    """The base64 text of ``raw`` at each of the three byte alignments inside a longer text.

    With ``k`` bytes before it (mod 3), the characters wholly made of ``raw``'s bits are the
    same whatever surrounds it: ``encode(pad + raw)[ceil(8k/6) : floor(8(k+n)/6)]``.
    """
    out = [encode(raw).decode("ascii").rstrip("=")]
    if len(raw) >= MIN_BASE64_CORE:
        for k in range(3):
            text = encode(b"\0" * k + raw).decode("ascii")
            core = text[-(-8 * k // 6) : (8 * (k + len(raw))) // 6]
            out.append(core)
    return out


@functools.lru_cache(maxsize=1024)
def secret_forms(secret: str) -> tuple[str, ...]:
    """Every form of ``secret`` that :meth:`Redactor.redact_text` scrubs, longest first."""
    raw = secret.encode("utf-8", "surrogatepass")
    forms = {
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        "".join(f"\\u{ord(c):04x}" for c in secret),
        "".join(f"\\u{ord(c):04X}" for c in secret),
        *_b64_cores(raw, base64.b64encode),
        *_b64_cores(raw, base64.urlsafe_b64encode),
    }
    return tuple(
        sorted((f for f in forms if len(f) >= MIN_SCRUB_LENGTH), key=lambda f: (-len(f), f))
    )


@functools.lru_cache(maxsize=256)
def _forms_pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """One alternation of escaped literals over all forms (longest first). Literals only, so
    Python's engine cannot backtrack badly, and it searches a text without a match in well
    under a microsecond (RE2's wrapper costs several per call)."""
    return re.compile("|".join(re.escape(f) for f in forms))


def _decoded_views(text: str) -> list[str]:
    """``text`` with its percent and JSON ``\\u`` escapes decoded (the views that differ)."""
    views = []
    if "%" in text:
        views.append(urllib.parse.unquote_plus(text))
        views.append(urllib.parse.unquote(text))
    if "\\u" in text:
        views.append(_JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text))
    return [v for v in views if v != text]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactionSettings:
    """The deployment's ``redaction:`` section (see docs/privacy.md)."""

    keys: tuple[str, ...] = ()  # extra key names: a key containing one is hidden whole
    patterns: tuple[str, ...] = ()  # RE2 expressions replaced inside every string
    # secret values by reference (charter.deploy.SecretRef), scrubbed in every form
    values: tuple[Any, ...] = ()

    def redactor(self, known: Iterable[str] = ()) -> Redactor:
        """The deployment-wide redactor: these settings plus ``known`` secret values."""
        return Redactor(keys=self.keys, patterns=self.patterns, values=known)


_MEMO_KEYS = 1024  # key names a redactor remembers (see Redactor._key)
_COLLECT_DEPTH = 256  # levels secret_values reads: past any accepted nesting (intake: 64), and
# so a cyclic value (a dict that holds itself, from a library caller) ends


def _unique(clean: Any, taken: Mapping[Any, Any]) -> Any:
    """A scrubbed key that collides with one already in ``taken`` gets ``#N``."""
    candidate, n = clean, 1
    while candidate in taken:
        n += 1
        candidate = f"{clean}#{n}"
    return candidate


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

    __slots__ = (
        "_forms",
        "_forms_re",
        "_keys",
        "_memo",
        "_patterns",
        "_pointers",
        "_sources",
        "_trie",
        "_values",
    )

    def __init__(
        self,
        *,
        pointers: Iterable[str] = (),
        patterns: Iterable[str] = (),
        values: Iterable[str] = (),
        keys: Iterable[str] = (),
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
        self._keys = tuple(sorted({normalize_key(k) for k in keys} - {""}))
        self._set_values(values)

    def _set_values(self, values: Iterable[str]) -> None:
        self._memo: dict[str, tuple[bool, str]] = {}  # see _key (the rules are set here)
        # longest first, so a value that contains another is replaced whole
        self._values = tuple(
            sorted({v for v in values if len(v) >= MIN_SCRUB_LENGTH}, key=lambda v: (-len(v), v))
        )
        forms = {f for v in self._values for f in secret_forms(v)}
        self._forms = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        # more than four forms are searched as one alternation (see _scrub_known), found
        # here once instead of in the pattern cache per text
        self._forms_re = _forms_pattern(self._forms) if len(self._forms) > 4 else None

    def __repr__(self) -> str:
        return (
            f"Redactor(pointers={list(self._pointers)!r}, patterns={len(self._sources)}, "
            f"keys={len(self._keys)}, remembered={len(self._values)})"
        )

    @property
    def longest_form(self) -> int:
        """The length of the longest text form of a remembered value (0 if none)."""
        return len(self._forms[0]) if self._forms else 0

    def is_sensitive_key(self, key: str) -> bool:
        """A built-in sensitive key name, or one containing a configured key word."""
        if is_sensitive_key(key):
            return True
        if not self._keys:
            return False
        norm = normalize_key(key)
        return any(word in norm for word in self._keys)

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
        new._keys = self._keys
        new._set_values(values)
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
        # ``type(...) is dict`` first: the ``Mapping`` ABC's check runs Python code
        if type(value) is dict or isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            memo = self._memo
            children = node.children if node is not None else None  # (None: no pointers)
            for key, item in value.items():
                known = memo.get(key) if type(key) is str else None
                sensitive, clean = self._key(key) if known is None else known
                if sensitive:
                    redacted: Any = REDACTED
                else:
                    child = children.get(str(key)) if children else None
                    if type(item) is str and child is None:  # a plain leaf: no call per value
                        redacted = self.redact_text(item)
                    else:
                        redacted = self._redact(item, child)
                out[_unique(clean, out) if clean in out else clean] = redacted
            return out
        if isinstance(value, list | tuple):
            items = [
                self._redact(item, node.children.get(str(i)) if node is not None else None)
                for i, item in enumerate(value)
            ]
            return items if isinstance(value, list) else tuple(items)
        return value

    def _key(self, key: Any) -> tuple[bool, Any]:
        """Whether a value under ``key`` is hidden whole, and the key with known secrets and
        patterns scrubbed. Both follow from the key name and this redactor's rules alone, so
        they are remembered per name (a schema's keys recur in every call)."""
        if not isinstance(key, str):
            return False, key
        known = (
            self.is_sensitive_key(key),
            self._scrub_known(key) if self._forms or self._patterns else key,
        )
        if type(key) is str and len(self._memo) < _MEMO_KEYS:
            self._memo[key] = known
        return known

    def secret_values(self, value: Any) -> frozenset[str]:
        """Every string (and number, as text) that :meth:`redact` would hide whole."""
        found: set[str] = set()
        self._collect(value, self._trie, False, found, _COLLECT_DEPTH)
        return frozenset(found)

    def _collect(
        self, value: Any, node: _Trie | None, hidden: bool, found: set[str], depth: int
    ) -> None:
        if depth == 0:  # deeper than any accepted argument (or a cycle): nothing to scrub
            return
        hidden = hidden or (node is not None and node.end)
        if isinstance(value, str):
            if hidden:
                found.add(value)
            return
        if isinstance(value, int | float) and not isinstance(value, bool):
            if hidden:
                found.add(str(value))
            return
        if type(value) is dict or isinstance(value, Mapping):
            memo = self._memo
            for key, item in value.items():
                child = node.children.get(str(key)) if node is not None else None
                known = memo.get(key) if type(key) is str else None
                sensitive = (self._key(key) if known is None else known)[0]
                if child is None and not (hidden or sensitive) and type(item) is str:
                    continue  # a string nothing hides: nothing to collect
                self._collect(item, child, hidden or sensitive, found, depth - 1)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                child = node.children.get(str(i)) if node is not None else None
                self._collect(item, child, hidden, found, depth - 1)

    # -- text -----------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """Scrub remembered values (in every form), patterns and ``key=value`` secrets."""
        text = self._scrub_known(text)
        folded = text.casefold()
        for word in _TEXT_TRIGGERS:  # a plain loop: no generator per string redacted
            if word in folded:
                for rule, replacement in _TEXT_RULES:
                    text = rule.sub(replacement, text)
                break
        if "://" in text and "@" in text:
            text = _URL_PASSWORD.sub(_url_password, text)
        return str(text)

    def _scrub_known(self, text: str) -> str:
        """Remembered values in every form, and the configured patterns (no text rules)."""
        if self._forms:
            pattern = self._forms_re
            if pattern is None:
                for form in self._forms:
                    if form in text:
                        text = text.replace(form, REDACTED)
            else:
                if pattern.search(text) is not None:
                    text = pattern.sub(REDACTED, text)
            if "%" in text or "\\u" in text:
                for view in _decoded_views(text):
                    if any(secret in view for secret in self._values):
                        return REDACTED  # a form we do not rewrite in place: fail closed
        for compiled in self._patterns:
            text = compiled.sub(REDACTED, text)
        return text

    def contains_secret(self, text: str) -> bool:
        """True if :meth:`redact_text` would change ``text`` (a known secret or a pattern)."""
        return self.redact_text(text) != text

    def refuse_in_id(self, value: str | None, field: str) -> None:
        """``IDENTIFIER_SECRET`` when an identifier a client chose (a session id) holds a known
        secret or a value a pattern matches: an id cannot be kept redacted (it must still
        match and be unique), so it is refused, as an artifact name is. Never echoed."""
        if value and self.contains_secret(value):
            raise InvalidInput(
                f"{field} contains a secret value; choose another (not echoed)",
                reason="IDENTIFIER_SECRET",
                details={"field": field},
            )

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


class StreamRedactor:
    """Redacts text that arrives in pieces (chat deltas, progress messages).

    A remembered value split across two pieces is still caught: :meth:`feed` holds back the
    tail of the text that could be the start of a form of a remembered value (at most that
    form's length minus one character) and emits the rest; a form that straddles the cut
    moves the cut before it. Ordinary text is held back only where its last characters begin
    a secret's form, so a stream without secrets flows on unchanged. :meth:`flush` emits what
    is held at the end of the stream. Configured patterns are applied to each emitted piece (a
    pattern match split across pieces is not held back unless it is a remembered value).
    """

    __slots__ = ("_buffer", "_forms", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._forms = redactor._forms
        self._buffer = ""

    @property
    def pending(self) -> int:
        """How many characters are held back."""
        return len(self._buffer)

    def _held(self, buffer: str) -> int:
        """The length of the longest tail of ``buffer`` that is a proper prefix of a form."""
        held = 0
        for form in self._forms:
            tail = buffer[-(len(form) - 1) :] if len(form) > 1 else ""
            index = tail.find(form[0])
            while index != -1 and len(tail) - index > held:
                if form.startswith(tail[index:]):
                    held = len(tail) - index
                    break
                index = tail.find(form[0], index + 1)
        return held

    def feed(self, text: str) -> str:
        """Take the next piece; return the redacted text that is safe to emit now."""
        buffer = self._buffer + text
        if not self._forms:
            self._buffer = ""
            return self._redactor.redact_text(buffer) if buffer else ""
        cut = len(buffer) - self._held(buffer)
        moved = True
        while moved and cut > 0:
            moved = False
            for form in self._forms:
                start = buffer.find(form, max(cut - len(form) + 1, 0), cut + len(form) - 1)
                if 0 <= start < cut < start + len(form):
                    cut, moved = start, True
        self._buffer = buffer[cut:]
        return self._redactor.redact_text(buffer[:cut]) if cut > 0 else ""

    def flush(self) -> str:
        """The redacted rest of the stream; the redactor is empty afterwards."""
        rest, self._buffer = self._buffer, ""
        return self._redactor.redact_text(rest) if rest else ""


class RedactingLogFilter(logging.Filter):
    """Scrubs a redactor's secrets from every record that passes a handler it is on.

    The message (with its arguments merged), a formatted exception and stack, and a
    ``charter`` fields dict are redacted in place; records are never dropped. Install it on
    handlers (not loggers) so records of third-party loggers that propagate to them are
    scrubbed too.
    """

    def __init__(self, *redactors: Redactor) -> None:
        super().__init__()
        self._redactors: list[Redactor] = list(redactors)

    def learn(self, redactor: Redactor) -> None:
        """Also apply ``redactor`` (a runtime's, while it is open)."""
        self._redactors.append(redactor)

    def forget(self, redactor: Redactor) -> None:
        """Stop applying ``redactor`` (its runtime closed)."""
        with contextlib.suppress(ValueError):
            self._redactors.remove(redactor)

    def filter(self, record: logging.LogRecord) -> bool:
        for redactor in (Redactor(), *self._redactors):
            self._scrub(record, redactor)
        return True

    def _scrub(self, record: logging.LogRecord, redactor: Redactor) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep only its template
            message = str(record.msg)
        clean = redactor.redact_text(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.redact_text(record.stack_info)
        fields = getattr(record, "charter", None)
        if isinstance(fields, dict):
            setattr(record, "charter", redactor.redact(fields))  # noqa: B010 - extra field


LOG_FILTER = RedactingLogFilter()
"""The filter Charter puts on its log handlers; each open runtime adds its redactor."""
