"""``raises``: the conformance suites' way to expect an exception, without pytest.

    with raises(StoreConflict) as info:
        await store.append(...)
    assert info.value.reason == "LEDGER_DUPLICATE_KEY"

The block must raise ``kind`` (or a subclass), and with ``match`` its message must contain a
match of that regular expression (:func:`re.search`); anything else propagates, and no
exception or a message that does not match fails with :class:`AssertionError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

E = TypeVar("E", bound=BaseException)


class Raised(Generic[E]):
    """The exception the block raised, once it has."""

    _value: E | None = None

    @property
    def value(self) -> E:
        if self._value is None:
            raise AssertionError("read .value after the with block")
        return self._value


@contextmanager
def raises(kind: type[E], *, match: str | None = None) -> Iterator[Raised[E]]:
    raised: Raised[E] = Raised()
    try:
        yield raised
    except kind as exc:
        if match is not None and re.search(match, str(exc)) is None:
            raise AssertionError(f"{kind.__name__} {str(exc)!r} does not match {match!r}") from exc
        raised._value = exc
        return
    raise AssertionError(f"expected {kind.__name__} to be raised")


__all__ = ["Raised", "raises"]
