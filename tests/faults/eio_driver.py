"""Subprocess driver for the EIO tests: one call with storage operations failing.

    LD_PRELOAD=eio.so CHARTER_EIO_MARK=NAME python tests/faults/eio_driver.py SPEC_JSON

Opens the runtime, touches the run and warms the call path up, then arms the shim
(``skip`` operations through, then ``fail`` failing; -1: every later one), makes the call
``c1`` (a pre-approved ``kv.put``), disarms, and makes one more call. Prints
``{"first": envelope, "ops": N, "after": envelope, "failure": str | None, "readyz": …}``
(what ``/readyz`` answers then).
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import sys
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


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
