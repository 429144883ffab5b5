from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

import charter
from charter.contracts.decorator import declaration, declared_contract
from charter.contracts.model import Approval, Danger, Effect
from charter.errors import ContractError


def test_bare_decorator_returns_the_same_function() -> None:
    def search(query: str, limit: int = 10) -> dict[str, Any]:
        """Search things."""
        return {"query": query, "limit": limit}

    decorated = charter.tool(search)
    assert decorated is search
    assert search("x") == {"query": "x", "limit": 10}
    contract = declared_contract(search)
    assert contract.id == "search"
    assert contract.name == "search"
    assert contract.description == "Search things."
    assert contract.effect is Effect.READ
    assert contract.danger is Danger.LOW
    assert contract.approval is Approval.NONE
    assert contract.args_schema["required"] == ["query"]
    assert contract.args_schema["additionalProperties"] is False
    assert contract.args_schema["properties"]["limit"]["default"] == 10


def test_id_as_positional_argument_derives_the_model_name() -> None:
    @charter.tool("workflow.getDefinition")
    def get_definition(definition_id: str) -> dict[str, Any]:
        """Get a definition."""
        return {}

    contract = declared_contract(get_definition)
    assert contract.id == "workflow.getDefinition"
    assert contract.name == "workflow_getDefinition"


def test_keyword_options_and_injected_context_excluded_from_schema() -> None:
    @charter.tool(
        id="notes.add",
        effect="write",
        requires_approval=True,
        permissions=["notes:write"],
        redact=["/secret"],
    )
    def add(
        title: Annotated[str, Field(max_length=10)],
        ctx: charter.Context,
        mode: Literal["a", "b"] = "a",
    ) -> dict[str, Any]:
        """Add one."""
        return {}

    decl = declaration(add)
    assert decl is not None
    assert decl.context_param == "ctx"
    contract = declared_contract(add)
    assert set(contract.args_schema["properties"]) == {"title", "mode"}
    assert contract.args_schema["properties"]["title"]["maxLength"] == 10
    assert contract.args_schema["properties"]["mode"]["enum"] == ["a", "b"]
    assert contract.effect is Effect.WRITE
    assert contract.approval is Approval.REQUIRED
    assert contract.danger is Danger.HIGH
    assert contract.permissions == ("notes:write",)
    assert contract.annotations.destructive is True
    assert contract.annotations.idempotent is False


def test_write_tool_requires_approval_even_if_not_asked() -> None:
    @charter.tool("x.write", effect="write")
    def w() -> None:
        """Write."""

    assert declared_contract(w).approval is Approval.REQUIRED


def test_write_tool_cannot_opt_out_of_approval() -> None:
    @charter.tool("x.write", effect="write", requires_approval=False)
    def w() -> None:
        """Write."""

    with pytest.raises(ContractError, match="every write tool requires approval"):
        declared_contract(w)


def test_proposal_defaults_to_medium_danger() -> None:
    @charter.tool("x.propose", effect="proposal")
    def p() -> None:
        """Propose."""

    c = declared_contract(p)
    assert c.danger is Danger.MEDIUM
    assert c.approval is Approval.NONE


def test_varargs_are_refused() -> None:
    @charter.tool
    def bad(*items: str) -> None:
        """Bad."""

    with pytest.raises(ContractError, match="arguments must be named"):
        declared_contract(bad)


def test_missing_description_is_refused() -> None:
    @charter.tool
    def nodoc(x: int) -> None:
        pass

    with pytest.raises(ContractError, match="needs a description"):
        declared_contract(nodoc)


def test_undecorated_function_is_reported() -> None:
    def plain() -> None:
        """Plain."""

    with pytest.raises(ContractError, match="not decorated"):
        declared_contract(plain)


def test_explicit_args_schema_is_kept() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}

    @charter.tool("x.n", args_schema=schema)
    def n(**kwargs: Any) -> None:
        """N."""

    assert declared_contract(n).args_schema == schema
