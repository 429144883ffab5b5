"""``@charter.tool``: declare a tool contract on a Python function.

The decorator never wraps the function: it returns the very same object with the declaration
attached, so the function stays a plain, unit-testable function. Contracts are validated when
the project is built (all problems are reported together); :func:`declared_contract` validates
one function's declaration on demand.

    @tool
    def search(query: str, limit: int = 10) -> list[dict]: ...

    @tool("workflow.getDefinition")
    def get_definition(definition_id: str) -> dict: ...

    @tool(id="notes.add", effect="write", requires_approval=True, permissions=["notes:write"])
    def add(title: str, body: str, ctx: Context) -> dict: ...
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.errors import PydanticUserError

from charter.contracts.model import ToolContract, contract_or_raise
from charter.contracts.tool_context import Context
from charter.errors import ContractError

F = TypeVar("F", bound=Callable[..., Any])

ATTRIBUTE = "__charter_tool__"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDeclaration:
    """What ``@tool`` attached to a function: raw contract data plus how to call it."""

    data: Mapping[str, Any]
    function: Callable[..., Any] = field(compare=False)
    context_param: str | None = None
    problem: str | None = None  # a signature the decorator could not turn into a schema


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    tool_id: str | None = None,
    /,
    *,
    id: str | None = None,
    name: str | None = None,
    version: str | None = None,
    title: str | None = None,
    description: str | None = None,
    effect: str = "read",
    requires_approval: bool | None = None,
    danger: str | None = None,
    timeout_s: float | None = None,
    call_limit: int | None = None,
    max_result_bytes: int | None = None,
    on_oversize: str | None = None,
    permissions: Iterable[str] = (),
    tenancy: str | None = None,
    agent_scopes: Iterable[str] = (),
    redact: Iterable[str] = (),
    audit: Iterable[str] = (),
    store_result: bool = True,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    args_schema: Mapping[str, Any] | None = None,
    result_schema: Mapping[str, Any] | None = None,
    artifacts: Mapping[str, Any] | None = None,
    delegates_execution: bool = False,
) -> Callable[[F], F]: ...


def tool(
    func_or_id: Any = None,
    /,
    *,
    id: str | None = None,
    name: str | None = None,
    version: str | None = None,
    title: str | None = None,
    description: str | None = None,
    effect: str = "read",
    requires_approval: bool | None = None,
    danger: str | None = None,
    timeout_s: float | None = None,
    call_limit: int | None = None,
    max_result_bytes: int | None = None,
    on_oversize: str | None = None,
    permissions: Iterable[str] = (),
    tenancy: str | None = None,
    agent_scopes: Iterable[str] = (),
    redact: Iterable[str] = (),
    audit: Iterable[str] = (),
    store_result: bool = True,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    args_schema: Mapping[str, Any] | None = None,
    result_schema: Mapping[str, Any] | None = None,
    artifacts: Mapping[str, Any] | None = None,
    delegates_execution: bool = False,
) -> Any:
    """Declare a tool contract on a function; returns the function unchanged."""
    options: dict[str, Any] = {
        "name": name,
        "version": version,
        "title": title,
        "description": description,
        "effect": effect,
        "danger": danger,
        "timeout_s": timeout_s,
        "call_limit": call_limit,
        "max_result_bytes": max_result_bytes,
        "on_oversize": on_oversize,
        "tenancy": tenancy,
        "result_schema": dict(result_schema) if result_schema is not None else None,
    }
    if requires_approval is not None:
        options["approval"] = "required" if requires_approval else "none"
    if permissions:
        options["permissions"] = list(permissions)
    if agent_scopes:
        options["agent_scopes"] = list(agent_scopes)
    if redact:
        options["redact"] = list(redact)
    if audit:
        options["audit"] = list(audit)
    if not store_result:
        options["store_result"] = False
    if artifacts is not None:
        options["artifacts"] = dict(artifacts)
    if delegates_execution:
        options["delegates_execution"] = True
    annotations = {
        k: v
        for k, v in {
            "destructive": destructive,
            "idempotent": idempotent,
            "open_world": open_world,
        }.items()
        if v is not None
    }
    if annotations:
        options["annotations"] = annotations

    def decorate(func: F, tool_id: str | None) -> F:
        if not callable(func):
            raise TypeError("@tool decorates a function")
        data = {k: v for k, v in options.items() if v is not None}
        data["id"] = tool_id or func.__name__
        if "description" not in data:
            data["description"] = inspect.cleandoc(func.__doc__ or "")
        problem = None
        context_param = None
        if args_schema is not None:
            data["args_schema"] = dict(args_schema)
            context_param = _context_param(func)
        else:
            try:
                data["args_schema"], context_param = schema_from_signature(func)
            except ContractError as exc:
                problem = str(exc)
        setattr(
            func,
            ATTRIBUTE,
            ToolDeclaration(data=data, function=func, context_param=context_param, problem=problem),
        )
        return func

    if callable(func_or_id):
        return decorate(func_or_id, id)
    if func_or_id is not None and not isinstance(func_or_id, str):
        raise TypeError("@tool takes a tool id string or keyword options")
    chosen = func_or_id or id
    return lambda func: decorate(func, chosen)


def declaration(func: Callable[..., Any]) -> ToolDeclaration | None:
    value = getattr(func, ATTRIBUTE, None)
    return value if isinstance(value, ToolDeclaration) else None


def declared_contract(func: Callable[..., Any]) -> ToolContract:
    """Validate and return the contract declared on ``func`` (raises :class:`ContractError`)."""
    decl = declaration(func)
    if decl is None:
        raise ContractError(f"{getattr(func, '__qualname__', func)!r} is not decorated with @tool")
    if decl.problem:
        raise ContractError(decl.problem, tool=str(decl.data.get("id")))
    return contract_or_raise(dict(decl.data))


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception as exc:  # NameError, TypeError from unresolvable forward references
        raise ContractError(
            f"cannot resolve the type hints of {func.__qualname__}: {exc}",
            tool=func.__name__,
        ) from None


def _context_param(func: Callable[..., Any]) -> str | None:
    hints = _hints(func)
    for pname, hint in hints.items():
        if hint is Context:
            return pname
    return None


def schema_from_signature(func: Callable[..., Any]) -> tuple[dict[str, Any], str | None]:
    """The JSON schema of a function's parameters, and the name of its ``Context`` parameter."""
    hints = _hints(func)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ContractError(
                f"{func.__qualname__} takes *{param.name}: tool arguments must be named",
                tool=func.__name__,
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ContractError(
                f"{func.__qualname__}: parameter {param.name!r} is positional-only; "
                "tools are called with named arguments",
                tool=func.__name__,
            )
        hint = hints.get(param.name, Any)
        if hint is Context:
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hint, default)
    try:
        model: type[BaseModel] = create_model(
            f"{func.__name__}_args",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        schema = model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ContractError(
            f"cannot derive an argument schema for {func.__qualname__}: {exc}",
            tool=func.__name__,
        ) from None
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema, context_param
