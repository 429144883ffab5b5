"""Result acceptance: schema check, redaction, then the size clamp (Elsa's order).

Redaction precedes truncation, so a secret is never half-cut into the truncated preview; an
oversized result becomes ``{"truncated": true, "maxBytes": N}`` or, where the contract says
``on_oversize: fail``, a ``resource_limit`` failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from charter.contracts.canonical import canonical_bytes
from charter.contracts.fastinit import maker
from charter.contracts.model import Oversize, ToolContract
from charter.contracts.schema import CompiledSchema
from charter.errors import ContractViolation, ResourceLimit


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    data: Any = field(repr=False)
    output_bytes: int
    warnings: tuple[str, ...] = ()


_make_accepted = maker(Accepted)  # once per governed call (contracts/fastinit.py)


def check_result(result: Any, schema: CompiledSchema | None) -> None:
    """Raise ``contract_violation`` when the result breaks the contract's result schema."""
    if schema is None:
        return
    violation = schema.first_error(result)
    if violation is not None:
        raise ContractViolation(
            f"the result does not match the result schema at {violation.pointer or '/'} "
            f"({violation.keyword})",
            reason="RESULT_SCHEMA_MISMATCH",
            details={"pointer": violation.pointer, "keyword": violation.keyword},
        )


def clamp(data: Any, contract: ToolContract) -> Accepted:
    """Apply the contract's size limit to already-redacted data."""
    size = len(canonical_bytes(data))
    limit = contract.max_result_bytes
    if size <= limit:
        return _make_accepted(data=data, output_bytes=size)
    if contract.on_oversize is Oversize.FAIL:
        raise ResourceLimit(
            f"the result is {size} bytes; the contract allows {limit}",
            reason="RESULT_TOO_LARGE",
            details={"bytes": size, "max_bytes": limit},
        )
    marker = {"truncated": True, "maxBytes": limit}
    return _make_accepted(
        data=marker,
        output_bytes=size,
        warnings=(f"RESULT_TRUNCATED: the result was {size} bytes (limit {limit})",),
    )


def model_text(body: dict[str, Any], limit: int) -> tuple[str, dict[str, Any] | None]:
    """A call's answer as the text a model reads (sorted JSON), within ``limit`` bytes.

    ``body`` carries at least ``status``. Over the limit, the text is a marker saying so
    instead (returned as the second value; ``None`` when the body fitted).
    """
    text = json.dumps(body, sort_keys=True, default=str)
    if len(text.encode("utf-8")) <= limit:
        return text, None
    marker = {
        "status": body["status"],
        "truncated": True,
        "maxBytes": limit,
        "note": "the tool result exceeded the model's result budget",
    }
    return json.dumps(marker, sort_keys=True), marker
