"""Append to one run forever, printing each acknowledged seq (the crash-safety test kills us)."""

from __future__ import annotations

import sys

import anyio

from charter.ledger.chain import LedgerKey
from charter.stores.factory import open_store
from charter.testing.scenarios import ev, run_created


async def main(url: str, run_id: str, key_hex: str) -> None:
    key = LedgerKey("crash", bytes.fromhex(key_hex))
    async with open_store(url, key=key) as store:
        if await store.head(run_id) is None:
            await store.append(run_id, [run_created()])
        n = 0
        while True:
            n += 1
            [event] = await store.append(run_id, [ev("task_progress", n=n, pad="x" * 64)])
            sys.stdout.write(f"{event.seq}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
