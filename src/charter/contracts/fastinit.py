"""Constructors for the frozen slotted dataclasses one governed call makes.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__`` (a
global look-up, an attribute and a slot-wrapper call per field): under callgrind about a
thousand instructions per field, so a call's tool context, execution request, envelope and
events cost tens of thousands. :func:`maker` builds, once per class, a function taking the
same keyword arguments that sets the slots through their descriptors (as
:mod:`charter.ledger.slots` does for the writer's events): the same object — of the same
class, with the same fields, as frozen as before — in well under half the work.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def maker(cls: type[T]) -> Callable[..., T]:
    """A keyword-only constructor of ``cls`` (a slotted dataclass without ``__post_init__``,
    which it would not run): every field a keyword, with the field's default or
    ``default_factory`` where it has one. (A mutable class's gain is the call alone: its
    ``__init__`` already sets plain attributes.)"""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__: use its constructor")
    frozen = typing.cast(Any, cls).__dataclass_params__.frozen
    fields = dataclasses.fields(typing.cast(Any, cls))
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_MISSING": _MISSING}
    params = []
    body = []
    for index, f in enumerate(fields):
        slot = next((k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__), None)
        if slot is None or not hasattr(slot, "__set__"):
            raise TypeError(f"{cls.__name__}.{f.name} is not a slot")
        scope[f"_set{index}"] = slot.__set__
        value = f.name
        if f.default is not dataclasses.MISSING:
            scope[f"_default{index}"] = f.default
            params.append(f"{f.name}=_default{index}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory{index}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            value = f"_factory{index}() if {f.name} is _MISSING else {f.name}"
        else:
            params.append(f.name)
        # (a mutable class's slots take plain attribute stores, which are faster still)
        store = f"_set{index}(obj, {value})" if frozen else f"obj.{f.name} = {value}"
        body.append(f"    {store}\n")
    source = (
        f"def make(*, {', '.join(params)}):\n    obj = _new(_cls)\n{''.join(body)}    return obj\n"
    )
    exec(source, scope)  # generated from the dataclass's own field names
    made: Callable[..., T] = scope["make"]
    made.__qualname__ = f"make_{cls.__name__}"
    return made


_MISSING = object()  # a default_factory field not given
