"""Golden ledgers: a recorded run exported to the portable layout, and damaged copies.

Regenerate (only when the event format changes on purpose, which also changes every hash):

    .venv/bin/python -m tests.golden.golden

``sample/`` is the export of :data:`charter.testing.scenarios.SAMPLE_RUN` recorded with a
fake clock and the fixed ``golden`` test key; each ``mutated/<case>/`` is a copy damaged one
way, with ``expected.json`` naming the reason and first bad sequence number verify must give.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio

from charter.ledger.chain import chain_hash
from charter.ledger.export import export_run
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import SAMPLE_RUN, record_sample_run

HERE = Path(__file__).parent
SAMPLE = HERE / "sample"
MUTATED = HERE / "mutated"
RUN_ID = "run-golden-0001"
KEY = fixed_ledger_key("golden")
N = len(SAMPLE_RUN)


def export_sample(target: Path) -> None:
    async def go() -> None:
        store = MemoryStore(key=KEY, clock=FakeClock())
        await record_sample_run(store, RUN_ID)
        await export_run(store, RUN_ID, target, KEY)

    anyio.run(go)


def _event(d: Path, seq: int) -> Path:
    return d / "events" / f"{seq:08d}.jsonl"


def _deleted(d: Path) -> None:
    _event(d, 5).unlink()


def _reordered(d: Path) -> None:
    three, four = _event(d, 3).read_bytes(), _event(d, 4).read_bytes()
    _event(d, 3).write_bytes(four)
    _event(d, 4).write_bytes(three)


def _rewritten(d: Path) -> None:
    path = _event(d, 6)
    path.write_bytes(path.read_bytes().replace(b"fetch actives", b"fetch ACTIVES"))


def _truncated(d: Path) -> None:
    _event(d, N).unlink()
    _event(d, N - 1).unlink()


def _torn(d: Path) -> None:
    path = _event(d, N)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _duplicated(d: Path) -> None:
    _event(d, 5).write_bytes(_event(d, 4).read_bytes())


def _recomputed(d: Path) -> None:
    """Rewrite event 6 and recompute every later hash — everything but the MAC."""
    _rewritten(d)
    prev = None
    for seq in range(6, N + 1):
        line = _event(d, seq).read_bytes()
        cut = line.rindex(b',"hash":')
        data, old_hash = line[:cut] + b"}", line[cut + 9 : -3].decode()
        if prev is not None:
            data = data.replace(json.loads(data)["prev_hash"].encode(), prev.encode())
        else:
            prev = json.loads(data)["prev_hash"]
        digest = chain_hash(prev, data)
        _event(d, seq).write_bytes(data[:-1] + b',"hash":"' + digest.encode() + b'"}\n')
        del old_hash
        prev = digest
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["head"]["hash"] = prev
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _snapshot(d: Path) -> None:
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["status"] = "failed"
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _index(d: Path) -> None:
    index = json.loads((d / "artifacts" / "index.json").read_text())
    index["artifacts"][0]["sha256"] = "sha256:" + "ee" * 32
    (d / "artifacts" / "index.json").write_text(json.dumps(index, indent=2) + "\n")


MUTATIONS: dict[str, tuple[Callable[[Path], None], str, int | None]] = {
    "deleted": (_deleted, "LEDGER_GAP", 5),
    "reordered": (_reordered, "LEDGER_SEQ_ORDER", 3),
    "rewritten": (_rewritten, "LEDGER_HASH_MISMATCH", 6),
    "truncated": (_truncated, "LEDGER_HEAD_MISMATCH", N - 1),
    "torn": (_torn, "LEDGER_TORN_TAIL", N),
    "duplicated": (_duplicated, "LEDGER_DUPLICATE_SEQ", 5),
    "recomputed": (_recomputed, "LEDGER_MAC_INVALID", N),
    "snapshot": (_snapshot, "SNAPSHOT_DIVERGENCE", N),
    "index": (_index, "SNAPSHOT_DIVERGENCE", N),
}


def regenerate() -> None:
    shutil.rmtree(SAMPLE, ignore_errors=True)
    shutil.rmtree(MUTATED, ignore_errors=True)
    export_sample(SAMPLE)
    for name, (mutate, reason, seq) in MUTATIONS.items():
        target = MUTATED / name
        shutil.copytree(SAMPLE, target)
        mutate(target)
        (target / "expected.json").write_text(
            json.dumps({"reason": reason, "seq": seq}, indent=2) + "\n"
        )


if __name__ == "__main__":
    regenerate()
