"""Subprocess driver for the EIO tests: one call with storage operations failing.

    LD_PRELOAD=eio.so CHARTER_EIO_MARK=NAME python tests/faults/eio_driver.py SPEC_JSON
    LD_PRELOAD=eio.so CHARTER_EIO_MARK=NAME python tests/faults/eio_driver.py --serve

Opens the runtime, touches the run and warms the call path up, then arms the shim
(``skip`` operations through, then ``fail`` failing; -1: every later one), makes the call
``c1`` (a pre-approved ``kv.put``), disarms, and makes one more call. Prints
``{"first": envelope, "ops": N, "after": envelope, "failure": str | None, "readyz": …}``
(what ``/readyz`` answers then).

``--serve`` reads one spec per line from standard input and runs each in a child forked
from this process (a fresh process, its own shim counters and SQLite connections, nothing
opened before the fork) so that Charter is imported once, not once per case; it prints each
child's result line, or ``{"error": "exit status N"}`` when the child did not end cleanly.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import sys
import traceback
from types import SimpleNamespace
from typing import Any

from charter.runtime import open_runtime
from charter.server.routes.ops import readyz


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    shim = ctypes.CDLL(None)  # the preloaded shim's symbols are global
    ctx = spec["context"]
    async with open_runtime(spec["project"], store=spec["store"]) as rt:
        await rt.get_call(ctx, "c1", as_="app")  # first touch: the run is verified
        await rt.call(ctx, "kv.get", "w0", {"key": "k"}, as_="app")
        shim.charter_eio_arm(ctypes.c_long(spec["skip"]), ctypes.c_long(spec["fail"]))
        first = await rt.call(ctx, "kv.put", "c1", {"key": "a", "value": "1"}, as_="app")
        ops = int(shim.charter_eio_ops())
        shim.charter_eio_disarm()
        after = await rt.call(ctx, "kv.get", "c2", {"key": "k"}, as_="app")
        failure = getattr(rt.store, "failure", None)
        ready = await readyz(SimpleNamespace(runtime=rt, readiness=()))  # type: ignore[arg-type]
    return {
        "first": first.to_dict(),
        "ops": ops,
        "after": after.to_dict(),
        "failure": failure,
        "readyz": {"status": ready.status_code, "body": json.loads(bytes(ready.body))},
    }


def serve() -> None:
    for line in sys.stdin:
        spec = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the child: one case, then out without running the parent's exit code
            code = 1
            try:
                print(json.dumps(asyncio.run(main(spec))), flush=True)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            print(json.dumps({"error": f"exit status {os.waitstatus_to_exitcode(status)}"}))
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
