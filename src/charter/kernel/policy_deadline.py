"""Ownership hooks under a deadline: a hook that overruns, fails or answers nonsense denies.

Deployment-supplied ownership hooks may do I/O (ask a database who owns a record). The kernel
runs each one under :attr:`~charter.kernel.settings.KernelSettings.policy_hook_deadline_s`
(default 250 ms): a plain function in a worker thread (so a slow one never blocks the event
loop), an ``async def`` hook on the loop. A hook that does not answer in time, or
answers something that is neither ``None`` nor a :class:`~charter.kernel.authorize.Denial`,
denies the call with ``permission_denied`` / ``POLICY_ERROR``; one that raises denies it with
``internal`` / ``POLICY_ERROR`` (a fault, not a decision) — each audited like every denial.
A timed-out thread is abandoned, not killed: it finishes in the background and its answer is
ignored.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread

from charter.kernel.authorize import (
    AFTER_VALIDATION,
    BEFORE_VALIDATION,
    FINAL,
    AuthorizationInput,
    Denial,
    Hook,
    raised,
    read_only,
    run_chain,
)

DEFAULT_DEADLINE_S = 0.25
_UP_TO_OWNERSHIP = (*BEFORE_VALIDATION, *AFTER_VALIDATION)


async def run_hook(hook: Hook, inp: AuthorizationInput, deadline_s: float) -> Denial | None:
    """One ownership hook's decision, or a ``POLICY_ERROR`` denial."""
    result: Any = None
    with anyio.move_on_after(deadline_s) as scope:
        try:
            if inspect.iscoroutinefunction(hook):
                result = await hook(inp)
            else:
                result = await anyio.to_thread.run_sync(hook, inp, abandon_on_cancel=True)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            return raised(exc)
    if scope.cancelled_caught:
        if inspect.iscoroutine(result):
            result.close()
        return Denial(
            reason="POLICY_ERROR",
            message=f"a policy hook did not answer within {deadline_s * 1000:g} ms; denying",
        )
    if result is None or isinstance(result, Denial):
        return result
    return Denial(
        reason="POLICY_ERROR",
        message="a policy hook answered something that is not a decision; denying",
    )


async def authorize_with_deadline(
    inp: AuthorizationInput,
    *,
    ownership: Sequence[Hook],
    deadline_s: float,
    disclosed: bool = False,
) -> Denial | None:
    """:func:`~charter.kernel.authorize.authorize` (the whole chain), each ownership hook
    under ``deadline_s``. An ownership hook sees the arguments as a read-only copy (made
    only when there is one); the built-in hooks only read them. ``disclosed``: the hooks that
    need no arguments (``BEFORE_VALIDATION``) already passed for this input, and would again:
    the chain starts after them."""
    denial = run_chain(inp, AFTER_VALIDATION if disclosed else _UP_TO_OWNERSHIP)
    if denial is not None:
        return denial
    if ownership:
        frozen_inp = read_only(inp)
        for hook in ownership:
            denial = await run_hook(hook, frozen_inp, deadline_s)
            if denial is not None:
                return denial
    return run_chain(inp, FINAL)
