"""The ``GET /describe`` document of ``charter.executor.v1``: what an executor says it
serves, parsed strictly (``docs/executors.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from charter.errors import ContractViolation
from charter.executors.http_protocol import PROTOCOL, StrictJSONError, loads_strict

DESCRIBE_INVALID = "DESCRIBE_INVALID"


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTool:
    id: str
    version: str
    contract_digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """A parsed ``GET /describe`` answer."""

    name: str
    version: str
    tools: Mapping[str, DescribedTool]
    address: str | None = None  # the address it was reached at, now pinned
    previous_address: str | None = None  # the address pinned before, if it changed


def parse_describe(body: bytes, url: str) -> Described:
    def invalid(what: str) -> ContractViolation:
        return ContractViolation(
            f"the executor at {url} sent an invalid describe document: {what}",
            reason=DESCRIBE_INVALID,
        )

    try:
        doc = loads_strict(body)
    except StrictJSONError:
        raise invalid("not JSON") from None
    if not isinstance(doc, dict):
        raise invalid("not an object")
    if doc.get("protocol") != PROTOCOL:
        raise invalid(f"protocol is not {PROTOCOL}")
    executor = doc.get("executor")
    if not isinstance(executor, dict):
        raise invalid("no executor {name, version}")
    name, version = executor.get("name"), executor.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise invalid("executor name and version must be strings")
    tools = doc.get("tools")
    if not isinstance(tools, list):
        raise invalid("tools must be a list")
    found: dict[str, DescribedTool] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("id", "version", "contract_digest")
        ):
            raise invalid(f"tools[{index}] needs string id, version and contract_digest")
        found[item["id"]] = DescribedTool(
            id=item["id"], version=item["version"], contract_digest=item["contract_digest"]
        )
    return Described(name=name, version=version, tools=found)
