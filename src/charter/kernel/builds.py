"""A call in a context of another Build, on a store that several Builds share.

A context answers only under the Build it was resolved for. During a rolling deploy old
replicas (Build B1) and new ones (B2) share one store, and a client's retry may reach either.
Which of them may *act* on such a context — retire the approval it holds — is decided by the
store's Build record (:mod:`charter.stores.builds`): a runtime activates its Build when it
opens, and only a runtime whose Build is the **current** one (activated last) retires what a
context of another Build holds; that Build is one the deployment has moved past (or rolled
back from). Any other runtime is a replica about to be replaced: it changes nothing (no
approval retired, no call reserved, no context closed) and answers a retryable refusal naming
the Build the context needs, so the call can go to a replica that runs it. A store without a
Build record (or with no Build activated yet) keeps the single-Build behaviour: the runtime's
Build is taken as current.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from charter.errors import PermissionDenied, StoreError, TransientExternal
from charter.kernel.answers import Answers
from charter.kernel.approvals import ApprovalGate
from charter.kernel.core import Attempt, KernelState
from charter.kernel.endcall import closed_context
from charter.kernel.envelope import Envelope
from charter.ledger.events import format_at
from charter.stores.builds import BuildStore

_log = logging.getLogger("charter.kernel.builds")
REASON = "CONTEXT_BUILD_CHANGED"


async def activate(state: KernelState) -> None:
    """Record that a runtime opened with ``state``'s Build (governed, when it opens: see
    ``Kernel.maintain_on_open``): it becomes the store's current Build (a no-op when it
    already is). Once per kernel. A store without a Build record is left alone."""
    store = state.store
    if state.build_activated or not isinstance(store, BuildStore):
        return
    digest = state.build.digest
    before = await store.current_build()
    record = await store.activate_build(digest, format_at(state.now()))
    state.build_activated = True
    if before is not None and before.digest != digest:
        _log.warning(
            "Build %s is now the current Build of this store (activation %d; was %s): "
            "runtimes of other Builds no longer retire what their contexts hold",
            digest[:19],
            record.activation,
            before.digest[:19],
        )


async def current_build(state: KernelState) -> str | None:
    """The digest of the store's current Build, or None when the store has no record of one."""
    store = state.store
    if not isinstance(store, BuildStore):
        return None
    record = await store.current_build()
    return record.digest if record is not None else None


async def other_build(
    state: KernelState,
    answers: Answers,
    approvals: ApprovalGate,
    at: Attempt,
    arguments: str | bytes | Mapping[str, Any],
) -> Envelope:
    """The answer to a call whose context was resolved under another Build than ours: a
    finished call's receipt, else a refusal — final (and the context's live approval retired)
    when our Build is the current one, retryable elsewhere when not (nothing reserved, run or
    retired: only the refusal's audit record is appended)."""
    ours, theirs = state.build.digest, at.ctx.build_digest
    try:
        current = await current_build(state)
    except StoreError:  # unknown: act on nothing, and say the call may be tried again
        current = "(unknown)"
    if current is None or current == ours:
        moved = PermissionDenied(
            "the context was resolved under another Build; resolve a new one",
            reason=REASON,
            details={"context_build": theirs, "build": ours},
        )
        await approvals.retire_stale(at)  # its approval can never be used now
        return await closed_context(state, answers, at, arguments, moved)
    elsewhere = TransientExternal(
        f"the context was resolved under Build {theirs[:19]}…, and this runtime runs Build "
        f"{ours[:19]}…, which is not the deployment's current Build: no call was reserved or run "
        "(only this refusal is audited) and the call id and its approval stay usable; "
        "call again on a runtime running the context's Build",
        reason=REASON,
        retryable=True,
        details={"context_build": theirs, "build": ours, "current_build": current},
    )
    return await closed_context(state, answers, at, arguments, elsewhere)
