"""JSON request bodies, checked once for every route of the API that takes one.

A route takes a JSON body when the framework decodes one for it (a body parameter), or when it
reads the body itself and documents ``application/json`` (a call, whose ``arguments`` must
reach the kernel as written). For each such route, :class:`JsonRoute` checks a non-empty body
before anything else of the route runs:

- its ``Content-Type`` must be JSON — ``application/json`` or ``application/<name>+json``,
  with no ``charset`` but ``utf-8`` (RFC 8259: JSON is UTF-8;
  :func:`charter.contracts.problem.json_type_refused`) — else ``415
  UNSUPPORTED_MEDIA_TYPE`` naming the type received (never the body), with ``Accept:
  application/json``. Without a ``Content-Type`` too (the framework would not decode it),
  except on a route that reads its body itself (a call): that body, with no type claimed, is
  read as JSON, as it always was, and refused by the JSON checks if it is not.
- its bytes must be UTF-8 without a byte order mark (RFC 8259 §8.1), else ``400
  BODY_MALFORMED`` (:func:`charter.server.body.json_text`) — the framework would guess
  UTF-16, UTF-32 or a UTF-8 BOM and take the body; a call's own parser never did.
- a body the framework decodes must be a JSON object, else ``400 BODY_MALFORMED`` naming what
  it is (``the body must be a JSON object, not null``): ``null`` is not "no body" on a route
  whose body is optional, and an array or a scalar is named as such rather than left to a
  schema mismatch. (A call's body, read by the route, is refused the same way.)
- a body the framework decodes must not name a member twice in any object, else ``400
  BODY_MALFORMED`` with the member's JSON Pointer (:func:`charter.server.body.repeated_member`;
  the decoder would silently keep the last value). A route reading its body itself parses it
  with :func:`charter.server.body.parse_object`, which refuses a repeated member of the body
  and hands ``arguments`` verbatim to the kernel, whose strict parser rejects and audits a
  repeat inside.

An empty body is the route's to judge (a decision's body is optional). Every such route's
OpenAPI responses list the problems these checks answer (400, 413, 415, 422).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import params
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from charter.contracts.problem import ACCEPT_JSON, JSON, json_type_refused
from charter.errors import ErrorCode, InvalidInput
from charter.server.body import (
    RepeatedMember,
    json_text,
    not_an_object,
    repeated_member,
)
from charter.server.problems import problem_response, problem_responses
from charter.server.query import QueryRoute


def _body_responses() -> dict[int | str, dict[str, Any]]:
    responses = problem_responses(400, 413, 415, 422)
    responses[415]["headers"] = {
        "Accept": {"description": "The media type a body must have", "schema": {"type": "string"}}
    }
    return responses


BODY_RESPONSES = _body_responses()


def takes_json(route: APIRoute) -> bool:
    """A body the framework decodes as JSON (not a form), or one the route reads itself and
    documents as ``application/json``."""
    field = route.body_field
    if field is not None:
        return not isinstance(field.field_info, params.Form)
    documented = (route.openapi_extra or {}).get("requestBody", {}).get("content", {})
    return JSON in documented


class JsonRoute(QueryRoute):
    """An API route whose JSON body (if it takes one) passes the checks above first (and
    whose query string names each single-valued parameter at most once: :class:`QueryRoute`)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if takes_json(self):
            for status, entry in BODY_RESPONSES.items():
                self.responses.setdefault(status, copy.deepcopy(entry))

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if not takes_json(self):
            return handler
        decoded = self.body_field is not None

        async def checked(request: Request) -> Response:
            raw = await request.body()
            content_type = request.headers.get("content-type")
            refused = json_type_refused(content_type) if raw and (decoded or content_type) else None
            if refused is not None:
                return problem_response(
                    code=ErrorCode.INVALID_INPUT,
                    reason="UNSUPPORTED_MEDIA_TYPE",
                    detail=refused,
                    headers=ACCEPT_JSON,
                )
            if raw:
                text = json_text(raw)  # UTF-8 without a BOM, else 400 BODY_MALFORMED
                why = not_an_object(text) if decoded else None
                if why is not None:  # never an optional body's null taken as "no body"
                    raise InvalidInput(why, reason="BODY_MALFORMED")
                path = repeated_member(raw) if decoded else None
                if path is not None:
                    raise RepeatedMember(path)
            return await handler(request)

        return checked
