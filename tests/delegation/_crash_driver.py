"""Run a delegating call in this process until it is killed (see test_crash.py).

    python -m tests.delegation._crash_driver PROJECT

Opens the runtime on the project's SQLite store, writes the context id to
``PROJECT/context.txt`` and calls ``team.crash``, whose second child (``kv.slow`` with
``DIE_IN_SLOW=1``) announces itself and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from charter.runtime import open_runtime
from tests.delegation import holder


async def main(project: Path) -> None:
    async with open_runtime(project, store="sqlite:///.charter/charter.db") as rt:
        holder.RUNTIME[:] = [rt]
        ctx = await rt.resolve_context("app", "all")
        (project / "context.txt").write_text(ctx.context_id)
        await rt.call(ctx.context_id, "team.crash", "c", {}, as_="app")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
