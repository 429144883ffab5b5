"""``raises``: the conformance suites' way to expect an exception, without pytest.

    with raises(StoreConflict) as info:
        await store.append(...)
    assert info.value.reason == "LEDGER_DUPLICATE_KEY"

The block must raise ``kind`` (or a subclass); anything else propagates, and no exception at
all fails with :class:`AssertionError`.
"""

from __future__ import annotations

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
def raises(kind: type[E]) -> Iterator[Raised[E]]:
    raised: Raised[E] = Raised()
    try:
        yield raised
    except kind as exc:
        raised._value = exc
        return
    raise AssertionError(f"expected {kind.__name__} to be raised")


__all__ = ["Raised", "raises"]
