"""Phase 1b of the call path: the deployment's rate and concurrency limits.

:func:`admit` runs before anything of the call is parsed or written: a call the limits refuse
is answered ``denied`` (a flood is counted, only a sample of it audited) without touching its
arguments; an admitted one holds its slots (the :class:`~charter.kernel.limits.Admission`)
until ``Kernel.call`` releases them.
"""

from __future__ import annotations

import re

from charter.contracts.text import clipped, shown
from charter.errors import InvalidInput
from charter.kernel.answers import Answers
from charter.kernel.core import Arrival, Attempt, KernelState
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.limits import ADMITTED, Admission, Limiter
from charter.kernel.redaction import Redactor
from charter.kernel.settings import Mode

# Matched with ``fullmatch``: ``re.match`` with ``$`` accepts a trailing newline ("a1\n"),
# which would name a second call for what the caller sees as the same id.
CALL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def call_id_refusal(at: Attempt, redactor: Redactor) -> InvalidInput | None:
    """``CALL_ID_INVALID`` for a call id of the wrong form, ``IDENTIFIER_SECRET`` for one that
    holds a secret ``redactor`` knows (a deployment secret, a configured pattern — or, with
    the call's redactor, one of its own secret argument values): an id is kept as it is in
    the ledger, rows and audit records, so it cannot be kept redacted. A secret id is
    dropped from the attempt (the refusal's audit record and answer carry none); one of the
    wrong form is recorded and echoed cut short, never whole."""
    if redactor.contains_secret(at.call_id):
        at.call_id = ""
        return InvalidInput(
            "call_id contains a secret value; choose another (not echoed)",
            reason="IDENTIFIER_SECRET",
            details={"field": "call_id"},
        )
    if CALL_ID.fullmatch(at.call_id) is None:
        # "" is also what the kernel holds for an id that was no string (None, a number)
        problem = f"not {shown(at.call_id)}" if at.call_id else "give a non-empty string"
        invalid = InvalidInput(
            f"call_id must match {CALL_ID.pattern} (at most 128 characters): {problem}",
            reason="CALL_ID_INVALID",
        )
        at.call_id = clipped(at.call_id, 128)
        return invalid
    return None


async def admit(
    state: KernelState,
    answers: Answers,
    limiter: Limiter | None,
    arrival: Arrival,
    context_id: str,
) -> Admission | Envelope:
    """1b. rate and concurrency limits, before anything is parsed or written."""
    if limiter is None:
        return ADMITTED
    ctx = await state.context(context_id, arrival.principal.tenant)
    if ctx is None or ctx.tenant != arrival.principal.tenant:
        return ADMITTED  # the call path answers CONTEXT_NOT_FOUND
    offered = ctx.offered(arrival.tool) if isinstance(arrival.tool, str) else None
    tool_id = offered.id if offered is not None else None
    # an old context may offer a tool this Build lacks: the call path denies it cleanly
    bound = state.build.tools.get(tool_id) if tool_id is not None else None
    mode = state.settings.modes.resolve(
        state.settings.mode, tool=tool_id, agent=ctx.agent, profile=ctx.profile
    )
    if mode is not Mode.ENFORCE:
        return ADMITTED
    lease = None
    if bound is not None:  # the longest the call can hold its slots: timeout + grace
        lease = bound.contract.timeout_s + state.settings.coalesce_grace_s + 60.0
    verdict = await limiter.admit(arrival.principal, tool_id, state.trace_id("slot"), lease_s=lease)
    if isinstance(verdict, Admission):
        return verdict
    at = arrival.attempt(ctx)
    if not CALL_ID.fullmatch(at.call_id):
        at.call_id = ""
    if bound is not None:  # the context offered it: the refusal may name it
        at.contract = bound.contract
    if limiter.sample(arrival.principal, verdict):  # a flood is counted, not all audited
        return await answers.refuse(at, verdict, CallStatus.DENIED)
    return answers.answer(at, CallStatus.DENIED, verdict, tool=tool_id, ctx=ctx)
