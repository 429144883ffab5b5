"""Query parameters named once: a single-valued parameter given twice is refused.

The framework reads a query parameter that is not a list with ``values.get(name)``, which
keeps the last of its repeats: ``?limit=5&limit=500`` would be answered with 500 items by a
route whose caller (or a proxy checking the first value) saw 5. So every route of the API
and of the console is a :class:`QueryRoute`, which knows its single-valued query parameters
from its own definition (the parameters the OpenAPI document lists, its dependencies'
included) and refuses a request naming one of them more than once — ``422 invalid_input``
/ ``QUERY_PARAM_REPEATED`` naming the parameter, with ``errors: [{loc: ["query", name],
type: "repeated_query_param", …}]`` as a malformed one's ``REQUEST_INVALID`` — before
anything of the route runs. A list-valued parameter may repeat (that is how a list is sent);
a parameter the route does not take is ignored, repeated or not, as before.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from charter.errors import InvalidInput
from charter.server.body import shown


class RepeatedQueryParam(InvalidInput):
    """A single-valued query parameter appears more than once: ``422 QUERY_PARAM_REPEATED``."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"the query parameter {shown(name)!r} appears more than once; give it once",
            reason="QUERY_PARAM_REPEATED",
        )

    def errors(self) -> list[dict[str, Any]]:
        """The problem's ``errors`` entry, located as a malformed parameter's is (``loc``)."""
        return [
            {
                "loc": ["query", shown(self.name)],
                "msg": "the parameter appears more than once",
                "type": "repeated_query_param",
            }
        ]


def single_valued(dependant: Dependant) -> frozenset[str]:
    """The names (aliases) of the query parameters a route — or any of its dependencies —
    takes one value of."""
    names: set[str] = set()
    pending = [dependant]
    while pending:
        current = pending.pop()
        names.update(
            field.alias
            for field in current.query_params
            if not is_sequence(field.field_info.annotation)
        )
        pending.extend(current.dependencies)
    return frozenset(names)


_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Set)


def is_sequence(annotation: Any) -> bool:
    """Whether a parameter annotated so takes several values (``list[str]``, ``set[int] |
    None``, ``Annotated[tuple[str, ...], …]``): the framework then reads every repeat. Kept
    here rather than taken from the framework's private helpers."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return is_sequence(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(is_sequence(arg) for arg in typing.get_args(annotation))
    kind = origin if origin is not None else annotation
    return (
        isinstance(kind, type)
        and issubclass(kind, _SEQUENCES)
        and not issubclass(kind, str | bytes | bytearray)
    )


def repeated(request: Request, names: frozenset[str]) -> str | None:
    """The first of ``names`` the request's query string gives more than once, or None."""
    counts = Counter(name for name, _ in request.query_params.multi_items() if name in names)
    return next((name for name, count in counts.items() if count > 1), None)


class QueryRoute(APIRoute):
    """A route that refuses a repeated single-valued query parameter before it runs."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        names = single_valued(self.dependant)
        if not names:
            return handler

        async def checked(request: Request) -> Response:
            name = repeated(request, names)
            if name is not None:
                raise RepeatedQueryParam(name)
            return await handler(request)

        return checked
