"""``audit`` pointers and ``store_result``: validated, in the digest only when set."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import charter
from charter.contracts.model import ToolContract


def test_digests_of_contracts_without_the_new_fields_do_not_change() -> None:
    plain = ToolContract(id="a.tool", description="d")
    same = ToolContract(id="a.tool", description="d", audit=(), store_result=True)
    assert plain.digest == same.digest
    assert "audit" not in plain.canonical()
    assert "store_result" not in plain.canonical()
    audited = ToolContract(id="a.tool", description="d", audit=("/path",))
    private = ToolContract(id="a.tool", description="d", store_result=False)
    assert len({plain.digest, audited.digest, private.digest}) == 3
    assert audited.canonical()["audit"] == ["/path"]
    assert private.canonical()["store_result"] is False


def test_audit_pointers_must_be_json_pointers() -> None:
    with pytest.raises(ValidationError, match="not a JSON pointer"):
        ToolContract(id="a.tool", description="d", audit=("path",))


def test_the_decorator_takes_both() -> None:
    @charter.tool("a.tool", audit=["/path"], store_result=False)
    def fn(path: str, body: str) -> dict[str, str]:
        """Write a body at a path."""
        return {}

    contract = ToolContract(**fn.__charter_tool__.data)  # type: ignore[attr-defined]
    assert contract.audit == ("/path",)
    assert contract.store_result is False
