"""This process's owner lease: renewed while any of its calls is between intent and outcome.

A call's intent names its owner — ``{host, pid, start, lease}`` — and the lease row
(:mod:`charter.stores.leases`) says whether that owner is still alive. :meth:`OwnerLease.held`
renews the lease *before* the intent is appended (so no other process can ever see a call of
a live owner without a live lease) and keeps renewing it every third of its lifetime while a
call is in flight. When the process dies, renewals stop; once ``expires_at`` passes, any other
process sharing the store reconciles the calls it left ``dispatching``. A store without lease
support (a third-party store) makes this a no-op: only the same-host pid check is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Coroutine, Mapping
from datetime import datetime, timedelta
from typing import Any

from charter.errors import StoreError
from charter.ledger.events import format_at
from charter.stores.leases import Lease, LeaseStore

_log = logging.getLogger("charter.kernel.leases")

LONGEST_LEASE = timedelta(hours=1)
"""No process renews its lease for longer than this (the default lifetime is 30 s). A lease
that says it lives further into the future was written outside Charter — a hand edit of the
``leases`` table, which carries no MAC — and counts as lapsed, so it cannot keep a dead
process's calls ``dispatching`` for good (:func:`lapsed`)."""


def lapsed(lease: Lease | None, now: datetime) -> bool:
    """Whether ``lease`` no longer shows its owner alive at ``now``: none (released, or
    never taken), expired, or expiring beyond :data:`LONGEST_LEASE` from now."""
    if lease is None:
        return True
    return not format_at(now) < lease.expires_at <= format_at(now + LONGEST_LEASE)


class OwnerLease:
    def __init__(
        self,
        store: object,
        now: Callable[[], datetime],
        owner: Mapping[str, Any],
        ttl_s: float,
    ):
        self._store = store if isinstance(store, LeaseStore) else None
        self._clock = now
        self._owner = owner
        self.owner_id = str(owner["lease"])
        self.ttl = timedelta(seconds=ttl_s)
        self._holders = 0
        self._renewed: datetime | None = None
        self._beat: asyncio.Task[None] | None = None

    @property
    def supported(self) -> bool:
        return self._store is not None

    def held(self) -> OwnerLease:
        """Hold the lease around one call's intent, dispatch and outcome:
        ``async with lease.held():`` (the lease is its own context manager, entered once per
        governed call: no async generator each time)."""
        return self

    async def __aenter__(self) -> None:
        renewal = self.take()
        if renewal is not None:
            try:
                await renewal
            except BaseException:
                self.drop()
                raise

    async def __aexit__(self, *exc: object) -> None:
        self.drop()

    def take(self) -> Coroutine[Any, Any, None] | None:
        """What ``async with held()`` enters, without a coroutine when nothing is due: hold
        the lease for one call, and return the renewal to await first when one is due (else
        None). Raises with nothing held; once it returns, :meth:`drop` must follow (also
        when the renewal fails)."""
        if self._store is None:
            return None
        self._holders += 1
        try:
            now = self._clock()
            if self._renewed is None or now - self._renewed >= self.ttl / 3:
                return self._renew_and_beat(now)
            self._keep_beating()
        except BaseException:
            self._holders -= 1
            raise
        return None

    def drop(self) -> None:
        """The call that :meth:`take` held the lease for has ended."""
        if self._store is not None:
            self._holders -= 1

    async def _renew_and_beat(self, now: datetime) -> None:
        await self._renew(now)
        self._keep_beating()

    def _keep_beating(self) -> None:
        if self._beat is None or self._beat.done():
            self._beat = asyncio.get_running_loop().create_task(self._heartbeat())

    async def _renew(self, now: datetime) -> None:
        assert self._store is not None
        await self._store.renew_lease(
            Lease(
                owner_id=self.owner_id,
                host=str(self._owner["host"]),
                pid=int(self._owner["pid"]),
                start=str(self._owner["start"]),
                renewed_at=format_at(now),
                expires_at=format_at(now + self.ttl),
            )
        )
        self._renewed = now

    async def _heartbeat(self) -> None:
        """Renew every third of the lifetime while calls are in flight; then stop."""
        while self._holders > 0:
            await asyncio.sleep(self.ttl.total_seconds() / 3)
            if self._holders == 0:
                break
            try:
                await self._renew(self._clock())
            except StoreError as exc:  # the next beat tries again; the lease may lapse
                _log.warning("could not renew the owner lease: %s", exc)

    async def read(self, owner_ids: Collection[str]) -> dict[str, Lease]:
        if self._store is None or not owner_ids:
            return {}
        return await self._store.read_leases(owner_ids)

    async def aclose(self) -> None:
        """Stop renewing and release the lease (a clean shutdown: nothing of ours is left in
        flight, and a call that is gets reconciled by the next process at once)."""
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
            self._beat = None
        if self._store is not None and self._renewed is not None:
            with contextlib.suppress(StoreError):
                await self._store.release_lease(self.owner_id)
            self._renewed = None
