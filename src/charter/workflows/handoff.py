"""Handoff validation (the ChemSpace envelope), as pure functions.

A handoff carries only what the receiving role needs: objective, constraints, acceptance
criteria, the input artifact ids, the expected outputs, the capabilities (tools), a budget and
trace ids. Histories and private reasoning are never handoff data: a forbidden key at any
depth — compared case-, dash-, underscore- and space-insensitively — refuses the handoff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from charter.contracts.text import shown
from charter.errors import InvalidInput
from charter.ledger.views import ArtifactRow
from charter.project.catalog import TaskContract

MAX_DEPTH = 32
MAX_BYTES = 64 * 1024
"""The handoff's JSON in UTF-8 bytes (its members summed), recorded whole in the ledger."""
MAX_TEXT = 4096
"""Characters of one free-text string: ``objective``, each constraint, ``notes`` when it is
text, ``trace_id``, ``span_id`` (as a context's ``objective``)."""
FORBIDDEN_KEYS = frozenset(
    {
        "messages",
        "history",
        "conversation_history",
        "chat_history",
        "transcript",
        "private_reasoning",
        "reasoning_trace",
        "chain_of_thought",
        "scratchpad",
        "thoughts",
        "inner_monologue",
        "memory",
    }
)
_NORMALISE = re.compile(r"[\s_\-]+")
_FORBIDDEN_NORMALISED = frozenset(_NORMALISE.sub("", k).lower() for k in FORBIDDEN_KEYS)
REQUIRED = (
    "objective",
    "sender_role",
    "receiver_role",
    "constraints",
    "acceptance_criteria",
    "input_artifact_ids",
    "expected_outputs",
    "capabilities",
    "budget",
)
OPTIONAL = ("trace_id", "span_id", "notes")
BUDGET_FIELDS = ("max_tokens", "max_tool_calls", "timeout_seconds")


def _bad(message: str, reason: str, **details: Any) -> InvalidInput:
    return InvalidInput(message, reason=reason, details=details or None)


def normalise_key(key: str) -> str:
    return _NORMALISE.sub("", key).lower()


def scan(value: Any, path: str = "", depth: int = 0) -> None:
    """Refuse forbidden keys at any depth and nesting deeper than :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        raise _bad(f"the handoff nests deeper than {MAX_DEPTH}", "HANDOFF_TOO_DEEP", at=path)
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _bad("handoff keys must be strings", "HANDOFF_INVALID", at=path)
            if normalise_key(key) in _FORBIDDEN_NORMALISED:
                raise _bad(
                    "histories and private reasoning are not handoff data",
                    "HANDOFF_FORBIDDEN_KEY",
                    at=f"{path}/{key}",
                )
            scan(item, f"{path}/{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            scan(item, f"{path}/{i}", depth + 1)


def _json_bytes(value: Any, name: str) -> int:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise _bad(f"{name} is not JSON", "HANDOFF_INVALID", field=name) from None
    return len(text.encode("utf-8", "surrogatepass"))


def check_size(handoff: Mapping[str, Any]) -> None:
    """Refuse a handoff over :data:`MAX_BYTES` (naming its largest member) or a free-text
    string over :data:`MAX_TEXT` characters (naming it): ``HANDOFF_TOO_LARGE``, before
    anything is recorded. Call after :func:`scan` (the nesting is bounded)."""
    sizes = {str(name): _json_bytes(value, str(name)) for name, value in handoff.items()}
    if sum(sizes.values()) > MAX_BYTES:
        largest = max(sizes, key=lambda n: sizes[n])
        raise _bad(
            f"the handoff is larger than {MAX_BYTES} bytes of JSON "
            f"({largest} alone is {sizes[largest]})",
            "HANDOFF_TOO_LARGE",
            field=largest,
            limit=MAX_BYTES,
        )
    for name in ("objective", "notes", "trace_id", "span_id", "constraints"):
        value = handoff.get(name)
        texts = value if name == "constraints" and isinstance(value, list) else [value]
        for i, text in enumerate(texts):
            if isinstance(text, str) and len(text) > MAX_TEXT:
                where = f"{name}[{i}]" if name == "constraints" else name
                raise _bad(
                    f"{where} is longer than {MAX_TEXT} characters",
                    "HANDOFF_TOO_LARGE",
                    field=where,
                    limit=MAX_TEXT,
                )


def _strings(h: Mapping[str, Any], name: str) -> list[str]:
    v = h[name]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise _bad(f"{name} must be a list of strings", "HANDOFF_INVALID", field=name)
    return v


def check_budget(budget: Any) -> dict[str, int]:
    if not isinstance(budget, Mapping):
        raise _bad("budget must be an object", "HANDOFF_BUDGET_INVALID")
    missing = [f for f in BUDGET_FIELDS if f not in budget]
    if missing:
        raise _bad(f"budget lacks {', '.join(missing)}", "HANDOFF_BUDGET_INVALID", missing=missing)
    extra = sorted(set(budget) - set(BUDGET_FIELDS))
    if extra:
        raise _bad(f"budget has unknown fields {', '.join(extra)}", "HANDOFF_BUDGET_INVALID")
    out = {}
    for f in BUDGET_FIELDS:
        v = budget[f]
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise _bad(f"budget.{f} must be a positive integer", "HANDOFF_BUDGET_INVALID")
        out[f] = v
    return out


def validate_handoff(
    handoff: Mapping[str, Any],
    task: TaskContract,
    artifacts: Mapping[str, ArtifactRow],
) -> dict[str, Any]:
    """The normalised handoff for ``task``; ``artifacts`` are the run's registered rows by id.

    Checks: forbidden keys and depth, size (:func:`check_size`), the envelope's fields,
    sender ≠ receiver, receiver = the task's role, capabilities / expected outputs /
    acceptance criteria equal to the task contract, and exactly one registered artifact per
    declared input type. The caller verifies the checksums of the returned ``input_artifact_ids``.
    """
    if not isinstance(handoff, Mapping):
        raise _bad("a handoff is an object", "HANDOFF_INVALID")
    scan(handoff)
    check_size(handoff)
    missing = [f for f in REQUIRED if f not in handoff]
    if missing:
        raise _bad(f"the handoff lacks {', '.join(missing)}", "HANDOFF_INVALID", missing=missing)
    unknown = sorted(set(handoff) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise _bad(
            f"the handoff has unknown fields {', '.join(unknown)}",
            "HANDOFF_UNKNOWN_FIELD",
            fields=unknown,
        )
    objective = handoff["objective"]
    if not isinstance(objective, str) or not objective.strip():
        raise _bad("objective must be a non-empty string", "HANDOFF_INVALID", field="objective")
    sender, receiver = handoff["sender_role"], handoff["receiver_role"]
    if not isinstance(sender, str) or not isinstance(receiver, str):
        raise _bad("sender_role and receiver_role are strings", "HANDOFF_INVALID")
    if sender == receiver:
        raise _bad("a role cannot hand off to itself", "HANDOFF_SAME_ROLE")
    if receiver != task.role:
        raise _bad(
            f"task {task.id} is for role {task.role!r}, not {shown(receiver)}",
            "HANDOFF_WRONG_RECEIVER",
            expected=task.role,
        )
    constraints = _strings(handoff, "constraints")
    criteria = _strings(handoff, "acceptance_criteria")
    outputs = _strings(handoff, "expected_outputs")
    capabilities = _strings(handoff, "capabilities")
    inputs = _strings(handoff, "input_artifact_ids")
    if sorted(capabilities) != sorted(task.required_tools):
        raise _bad(
            "capabilities must equal the task's tools",
            "HANDOFF_CAPABILITIES_MISMATCH",
            expected=sorted(task.required_tools),
        )
    if sorted(outputs) != sorted(task.output_artifacts):
        raise _bad(
            "expected_outputs must equal the task's outputs",
            "HANDOFF_OUTPUTS_MISMATCH",
            expected=sorted(task.output_artifacts),
        )
    if list(criteria) != list(task.acceptance_criteria):
        raise _bad(
            "acceptance_criteria must equal the task contract's",
            "HANDOFF_CRITERIA_MISMATCH",
        )
    budget = check_budget(handoff["budget"])
    resolve_inputs(inputs, task, artifacts)
    out: dict[str, Any] = {
        "objective": objective,
        "sender_role": sender,
        "receiver_role": receiver,
        "constraints": constraints,
        "acceptance_criteria": criteria,
        "input_artifact_ids": inputs,
        "expected_outputs": outputs,
        "capabilities": capabilities,
        "budget": budget,
    }
    for f in OPTIONAL:
        if f in handoff:
            out[f] = handoff[f]
    return out


def resolve_inputs(
    ids: Sequence[str], task: TaskContract, artifacts: Mapping[str, ArtifactRow]
) -> dict[str, str]:
    """Declared input type → the one artifact id that provides it."""
    by_type: dict[str, list[str]] = {}
    for aid in ids:
        row = artifacts.get(aid)
        if row is None:
            raise _bad(
                "an input artifact is not registered in this run",
                "HANDOFF_INPUT_UNKNOWN",
                artifact_id=aid,
            )
        by_type.setdefault(str(row.type), []).append(aid)
    out: dict[str, str] = {}
    for typ in task.input_artifacts:
        found = by_type.get(typ, [])
        if len(found) != 1:
            raise _bad(
                f"input {typ!r} must resolve to exactly one artifact (found {len(found)})",
                "HANDOFF_INPUT_UNRESOLVED",
                type=typ,
            )
        out[typ] = found[0]
    extra = sorted(set(by_type) - set(task.input_artifacts))
    if extra:
        raise _bad(f"inputs of undeclared types: {', '.join(extra)}", "HANDOFF_INPUT_UNDECLARED")
    return out
