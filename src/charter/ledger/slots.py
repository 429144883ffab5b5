"""Building frozen slotted dataclasses on the append path without their generated ``__init__``.

A frozen dataclass's ``__init__`` takes its fields as keywords (the call builds a dict and
unpacks it again) and sets each through ``object.__setattr__``; for an event that costs as much
as sealing its frame. Setting the slots through their descriptors makes the same object — of the
same class, with the same fields, as frozen as before — in about half the work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

Setter = Callable[[object, Any], None]


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Setter, ...]:
    """The slot setters of ``cls``'s fields, in ``names`` order.

    Raises unless ``names`` are exactly the dataclass's fields, in order: a field added to the
    class later then fails at import instead of being left unset by a fast constructor.
    """
    declared = tuple(f.name for f in dataclasses.fields(cls))
    if declared != names:
        raise TypeError(f"{cls.__name__} fields are {declared}, not {names}")
    return tuple(cls.__dict__[name].__set__ for name in names)
