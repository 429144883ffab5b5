"""Ledger benchmarks, each beside the bare floor measured in the same run.

    python bench/ledger.py [--events 1000000] [--check] [--json] [--write-results]

Measures (SQLite unless named):

* bare floors: one SQLite insert+commit with synchronous=FULL (WAL); one psycopg insert+commit;
* single-writer append latency p50/p95/p99 (SQLite and PostgreSQL); on SQLite the appends
  alternate with the bare FULL commits, so both see the same machine;
* throughput with 32 concurrent writers (group commit) against the single writer's, beside
  the same ratio for bare SQLite (32-row commits, one row per run, against 1-row commits in
  the store's table layout): the ceiling group commit can reach on this disk;
* append latency at the tail of a 1k-event run and of a 1M-event run (the big run is bulk
  inserted as prepared, correctly chained rows, then appended to through the API), beside the
  bare table's own 1M/1k ratio; each run and bare table in a database of its own, all four
  sampled in one interleaved loop;
* verify throughput (events/s) beside a bare loop that only reads rows and chains sha256
  (alternating, best of three each).

Goals (``--check`` exits 1 when one is missed): single-writer p95 ≤ 2× the bare FULL commit
p95; 32 writers ≥ 8× single-writer throughput; the 1M/1k latency ratio within 10 % of the bare
ratio; verify ≥ 50 % of the bare read-and-hash loop. Timings on a shared machine are noisy:
compare the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from _results import write_section
from charter.ledger.chain import LedgerKey, chain_hash
from charter.ledger.events import GENESIS_HASH, format_at, payload_bytes, stored_bytes
from charter.ledger.verify import verify_run
from charter.stores.postgres import PostgresStore
from charter.stores.sqlite import SQLiteStore
from charter.testing.scenarios import ev, run_created

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = LedgerKey("bench", b"b" * 32)
BARE_ROW = b"x" * 300


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50_us": pct(samples, 0.50) * 1e6,
        "p95_us": pct(samples, 0.95) * 1e6,
        "p99_us": pct(samples, 0.99) * 1e6,
        "mean_us": statistics.fmean(samples) * 1e6,
    }


# -- bare floors ---------------------------------------------------------------------------


def bare_table(path: Path, *, preload: int = 0) -> tuple[sqlite3.Connection, str, int]:
    """A bare WAL/FULL table holding ``preload`` rows of one run: (connection, run, last seq)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bare (run_id TEXT, seq INTEGER, data BLOB, "
        "PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    run = f"bare-{secrets.token_hex(4)}"
    seq = 0
    while seq < preload:
        conn.execute("BEGIN")
        chunk = min(50_000, preload - seq)
        conn.executemany(
            "INSERT INTO bare VALUES (?, ?, ?)",
            ((run, seq + i + 1, BARE_ROW) for i in range(chunk)),
        )
        conn.execute("COMMIT")
        seq += chunk
    empty_wal(conn)
    return conn, run, seq


def empty_wal(conn: sqlite3.Connection) -> None:
    """Checkpoint and truncate the WAL, so that every database starts measuring alike: a WAL
    left large by a bulk load is overwritten in place, cheaper to sync than one that grows."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def bare_insert(conn: sqlite3.Connection, run: str, seq: int) -> float:
    """Seconds for one insert+commit (the floor every append pays)."""
    t = time.perf_counter()
    conn.execute("BEGIN")
    conn.execute("INSERT INTO bare VALUES (?, ?, ?)", (run, seq, BARE_ROW))
    conn.execute("COMMIT")
    return time.perf_counter() - t


def bare_group_commit(path: Path, *, writers: int, rounds: int) -> dict[str, float]:
    """The group-commit ceiling without Charter: commits of one row, alternating with commits
    of one row for each of ``writers`` runs, into a table laid out like the store's events
    (rows in append order, ``(run_id, seq)`` unique in an index; WAL, FULL), rows the size of
    the appended events. Returns rows/s for both and their ratio: what 32 closed-loop writers
    could gain over one if appending cost nothing but the database's own work."""
    row = stored_bytes(
        run_id="conc-0",
        seq=1,
        type="task_progress",
        at=format_at(__import__("datetime").datetime.now(__import__("datetime").UTC)),
        payload_bytes=payload_bytes(ev("task_progress", n=1, note="x" * 100).payload),
        prev_hash=GENESIS_HASH,
    )
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE bare (run_id TEXT, seq INTEGER, data BLOB)")
    conn.execute("CREATE UNIQUE INDEX bare_by_run ON bare (run_id, seq)")
    runs = [f"conc-{w}" for w in range(writers)]
    one: list[float] = []
    group: list[float] = []
    for seq in range(1, rounds + 1):
        for kind in ("one", "group") if seq % 2 else ("group", "one"):
            t = time.perf_counter()
            conn.execute("BEGIN")
            if kind == "one":
                conn.execute("INSERT INTO bare VALUES (?, ?, ?)", ("alone", seq, row))
            else:
                conn.executemany("INSERT INTO bare VALUES (?, ?, ?)", [(r, seq, row) for r in runs])
            conn.execute("COMMIT")
            (one if kind == "one" else group).append(time.perf_counter() - t)
    conn.close()
    one_per_s = 1 / statistics.fmean(one)
    group_per_s = writers / statistics.fmean(group)
    return {"one_per_s": one_per_s, "group_per_s": group_per_s, "ratio": group_per_s / one_per_s}


def bare_pg(url: str, n: int) -> list[float]:
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE bare (run_id TEXT, seq BIGINT, data BYTEA, PRIMARY KEY (run_id, seq))"
        )
        for seq in range(1, n + 1):
            t = time.perf_counter()
            with conn.transaction():
                conn.execute("INSERT INTO bare VALUES (%s, %s, %s)", ("bare", seq, b"x" * 300))
            out.append(time.perf_counter() - t)
    return out


def bare_read_and_hash(path: Path, run_id: str) -> float:
    """Events per second of a loop that only reads the rows and chains sha256."""
    conn = sqlite3.connect(path)
    t = time.perf_counter()
    prev = GENESIS_HASH
    count = 0
    for (data,) in conn.execute("SELECT data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)):
        h = hashlib.sha256(prev.encode())
        h.update(data)
        prev = "sha256:" + h.hexdigest()
        count += 1
    elapsed = time.perf_counter() - t
    conn.close()
    return count / elapsed


# -- through the store ---------------------------------------------------------------------


async def single_writer(store: Any, run_id: str, n: int) -> list[float]:
    await store.append(run_id, [run_created()])
    out = []
    for i in range(n):
        t = time.perf_counter()
        await store.append(run_id, [ev("task_progress", n=i, note="x" * 100)])
        out.append(time.perf_counter() - t)
    return out


async def start_runs(store: Any, count: int) -> list[str]:
    runs = [f"conc-{w}" for w in range(count)]
    for run_id in runs:
        await store.append(run_id, [run_created()])
    return runs


async def concurrent_writers(store: Any, runs: list[str], per_writer: int) -> float:
    """Appends per second with one writer per run, each awaiting its append before the next."""

    async def writer(run_id: str) -> None:
        for i in range(per_writer):
            await store.append(run_id, [ev("task_progress", n=i, note="x" * 100)])

    t = time.perf_counter()
    await asyncio.gather(*(writer(r) for r in runs))
    return len(runs) * per_writer / (time.perf_counter() - t)


def bulk_run(path: Path, run_id: str, events: int) -> None:
    """Insert a correctly chained run of ``events`` events directly (not through the API)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    at = format_at(__import__("datetime").datetime(2025, 1, 1, tzinfo=__import__("datetime").UTC))
    prev = GENESIS_HASH
    seq = 0
    first = run_created()
    while seq < events:
        batch = []
        for _ in range(min(50_000, events - seq)):
            seq += 1
            entry = first if seq == 1 else ev("task_progress", n=seq, note="x" * 100)
            data = stored_bytes(
                run_id=run_id,
                seq=seq,
                type=entry.type,
                at=at,
                payload_bytes=payload_bytes(entry.payload),
                prev_hash=prev,
            )
            digest = chain_hash(prev, data)
            batch.append((run_id, seq, entry.type, at, prev, digest, data))
            prev = digest
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO events (run_id, seq, type, at, prev_hash, hash, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            batch,
        )
        conn.execute("COMMIT")
    # The run row exactly as the projection handler builds it from the first event.
    from charter.ledger.events import Event as _Event
    from charter.ledger.projections import HANDLERS as _HANDLERS
    from charter.ledger.projections import run_key as _run_key

    first_event = _Event(
        schema_version=1,
        run_id=run_id,
        seq=1,
        event_id="00000001",
        type=first.type,
        at=at,
        payload=first.payload,
        prev_hash=GENESIS_HASH,
        hash="",
    )
    run_row = _HANDLERS["run_created"].apply(first_event, {}.get)[_run_key(run_id)]
    from charter.ledger.projections import TABLES as _TABLES
    from charter.stores._sql import upsert_params, upsert_sql

    conn.execute("BEGIN")
    params = upsert_params(_run_key(run_id), run_row, 1, KEY)  # written by event 1, MAC sealed
    conn.execute(upsert_sql(_TABLES["runs"], "?"), params)
    conn.execute(
        "INSERT INTO run_heads VALUES (?, ?, ?, ?)", (run_id, seq, prev, KEY.mac(run_id, seq, prev))
    )
    conn.execute("COMMIT")
    conn.close()


async def timed_append(store: Any, run_id: str, n: int) -> float:
    t = time.perf_counter()
    await store.append(run_id, [ev("task_progress", n=n, note="x" * 100)])
    return time.perf_counter() - t


async def single_beside_bare(
    store: Any, bare_path: Path, samples: int
) -> tuple[list[float], list[float]]:
    """Single-writer appends and bare FULL commits, alternating (the order flipping every
    round), so that drift on a shared machine falls on both alike: (bare, appends)."""
    conn, run, last = bare_table(bare_path)
    await store.append("single", [run_created()])
    bare: list[float] = []
    single: list[float] = []
    for i in range(samples):
        if i % 2:
            single.append(await timed_append(store, "single", i))
            bare.append(bare_insert(conn, run, last + i + 1))
        else:
            bare.append(bare_insert(conn, run, last + i + 1))
            single.append(await timed_append(store, "single", i))
    conn.close()
    return bare, single


async def tail_latencies(tmp: Path, events: int, samples: int) -> dict[str, Any]:
    """Append latency at the tail of a 1k-event and of a big run, beside the bare table's.

    Each run (ledger and bare) has a database of its own, and the four are sampled in one
    interleaved loop (the order rotating every round), so warm-up and drift on a shared
    machine fall on all four alike instead of on whichever is measured last.
    """
    small_db, big_db = tmp / "small.db", tmp / "big.db"
    async with SQLiteStore.open(small_db, key=KEY) as store:
        await store.append("small", [run_created()])
        for i in range(999):
            await store.append("small", [ev("task_progress", n=i, note="x" * 100)])
    async with SQLiteStore.open(big_db, key=KEY):
        pass  # creates the schema
    t = time.perf_counter()
    bulk_run(big_db, "big", events)
    res: dict[str, Any] = {"bulk_insert_s": time.perf_counter() - t}
    bare_small = bare_table(tmp / "bare1k.db", preload=1000)
    bare_big = bare_table(tmp / "barebig.db", preload=events)
    for path in (small_db, big_db):
        with contextlib.closing(sqlite3.connect(path)) as conn:
            empty_wal(conn)
    async with (
        SQLiteStore.open(small_db, key=KEY) as small,
        SQLiteStore.open(big_db, key=KEY) as big,
    ):
        ledgers = {"at_1k": (small, "small"), "at_big": (big, "big")}
        bares = {"bare_1k": bare_small, "bare_big": bare_big}
        names = [*ledgers, *bares]
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(samples):
            for name in names[i % 4 :] + names[: i % 4]:
                if name in ledgers:
                    store, run_id = ledgers[name]
                    took = await timed_append(store, run_id, i)
                else:
                    conn, run, last = bares[name]
                    took = bare_insert(conn, run, last + i + 1)
                times[name].append(took)
        # Verify and the bare read-and-hash loop alternate; each keeps its best of three.
        res["verify_per_s"] = res["bare_read_hash_per_s"] = 0.0
        for _ in range(3):
            t = time.perf_counter()
            report = await verify_run(big, "big", KEY)
            elapsed = time.perf_counter() - t
            assert report.ok, report
            res["verify_per_s"] = max(res["verify_per_s"], report.events / elapsed)
            bare_rate = bare_read_and_hash(big_db, "big")
            res["bare_read_hash_per_s"] = max(res["bare_read_hash_per_s"], bare_rate)
    for conn, _, _ in (bare_small, bare_big):
        conn.close()
    res.update({name: summary(samples_) for name, samples_ in times.items()})
    return res


async def sqlite_suite(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    async with SQLiteStore.open(tmp / "ledger.db", key=KEY) as store:
        bare, single = await single_beside_bare(store, tmp / "bare.db", args.samples)
        res["bare_commit"] = summary(bare)
        res["single_writer"] = summary(single)
        # The throughput the 32 writers are compared with: one writer alone, nothing between.
        alone = await single_writer(store, "alone", args.samples)
        res["single_writer"]["per_s"] = 1 / statistics.fmean(alone)
        runs = await start_runs(store, 32)
        before = store.commits
        res["writers32_per_s"] = await concurrent_writers(store, runs, args.per_writer)
        res["writers32_appends_per_commit"] = 32 * args.per_writer / max(1, store.commits - before)
    res["bare_group"] = bare_group_commit(tmp / "bare_group.db", writers=32, rounds=args.per_writer)
    tails = await tail_latencies(tmp, args.events, args.samples)
    res["append_at_1k"], res["append_at_big"] = tails["at_1k"], tails["at_big"]
    res["ratio_big_1k"] = tails["at_big"]["p50_us"] / tails["at_1k"]["p50_us"]
    res["bare_at_1k"], res["bare_at_big"] = tails["bare_1k"], tails["bare_big"]
    res["bare_ratio_big_1k"] = tails["bare_big"]["p50_us"] / tails["bare_1k"]["p50_us"]
    for name in ("bulk_insert_s", "verify_per_s", "bare_read_hash_per_s"):
        res[name] = tails[name]
    return res


async def postgres_suite(args: argparse.Namespace) -> dict[str, Any]:
    name = f"charter_bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        res: dict[str, Any] = {"bare_commit": summary(bare_pg(url, args.samples))}
        async with PostgresStore.open(url, key=KEY, max_size=32) as store:
            single = await single_writer(store, "single", args.samples)
            res["single_writer"] = summary(single)
            res["single_writer"]["per_s"] = 1 / statistics.fmean(single)
            runs = await start_runs(store, 32)
            res["writers32_per_s"] = await concurrent_writers(store, runs, args.per_writer)
        return res
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def goals(res: dict[str, Any]) -> list[tuple[str, bool, str]]:
    s = res["sqlite"]
    p95, bare95 = s["single_writer"]["p95_us"], s["bare_commit"]["p95_us"]
    speedup = s["writers32_per_s"] / s["single_writer"]["per_s"]
    ratio, bare_ratio = s["ratio_big_1k"], s["bare_ratio_big_1k"]
    verify = s["verify_per_s"] / s["bare_read_hash_per_s"]
    return [
        (
            "single-writer p95 <= 2x bare FULL commit p95",
            p95 <= 2 * bare95,
            f"{p95:.0f} us vs {bare95:.0f} us ({p95 / bare95:.2f}x)",
        ),
        (
            "32 writers >= 8x single-writer throughput",
            speedup >= 8,
            f"{s['writers32_per_s']:.0f}/s vs {s['single_writer']['per_s']:.0f}/s ({speedup:.1f}x; "
            f"bare SQLite ceiling {s['bare_group']['ratio']:.1f}x)",
        ),
        (
            "1M/1k latency ratio within 10% of bare ratio",
            ratio <= bare_ratio * 1.10,
            f"{ratio:.2f} vs bare {bare_ratio:.2f}",
        ),
        (
            "verify >= 50% of bare read-and-hash",
            verify >= 0.5,
            f"{s['verify_per_s']:.0f}/s vs {s['bare_read_hash_per_s']:.0f}/s ({verify:.0%})",
        ),
    ]


def render(res: dict[str, Any], checks: list[tuple[str, bool, str]]) -> str:
    s, p = res["sqlite"], res["postgres"]
    lines = [
        "## ledger",
        "",
        f"`python bench/ledger.py` — {res['events']:,} events in the big run, "
        f"{res['samples']} samples per latency, {time.strftime('%Y-%m-%d')}; 2 shared cores, "
        "numbers drift 10–50 % between runs, the ratios are what matter. Single-writer appends "
        "alternate with the bare commits (latency); the throughput the 32 writers are compared "
        "with is one writer alone; verify and the bare read-and-hash loop alternate, best of "
        "three each.",
        "",
        "| measurement | p50 µs | p95 µs | p99 µs |",
        "|---|---|---|---|",
    ]
    for label, m in (
        ("bare SQLite insert+commit (WAL, FULL)", s["bare_commit"]),
        ("SQLite append, single writer", s["single_writer"]),
        ("SQLite append at event ~1k", s["append_at_1k"]),
        (f"SQLite append at event ~{res['events']:,}", s["append_at_big"]),
        ("bare SQLite insert+commit at row ~1k", s["bare_at_1k"]),
        (f"bare SQLite insert+commit at row ~{res['events']:,}", s["bare_at_big"]),
        ("bare psycopg insert+commit", p["bare_commit"]),
        ("PostgreSQL append, single writer", p["single_writer"]),
    ):
        lines.append(f"| {label} | {m['p50_us']:.0f} | {m['p95_us']:.0f} | {m['p99_us']:.0f} |")
    lines += [
        "",
        "| throughput | value |",
        "|---|---|",
        f"| SQLite single writer | {s['single_writer']['per_s']:.0f} appends/s |",
        f"| SQLite 32 writers (group commit) | {s['writers32_per_s']:.0f} appends/s "
        f"({s['writers32_appends_per_commit']:.1f} appends per commit) |",
        f"| bare SQLite, 1-row commits | {s['bare_group']['one_per_s']:.0f} rows/s |",
        f"| bare SQLite, 32-row commits (one row per run) | {s['bare_group']['group_per_s']:.0f} "
        f"rows/s ({s['bare_group']['ratio']:.1f}x the 1-row commits: the group-commit ceiling) |",
        f"| PostgreSQL single writer | {p['single_writer']['per_s']:.0f} appends/s |",
        f"| PostgreSQL 32 writers | {p['writers32_per_s']:.0f} appends/s |",
        f"| verify | {s['verify_per_s']:.0f} events/s |",
        f"| bare read + sha256 chain | {s['bare_read_hash_per_s']:.0f} events/s |",
        f"| bulk insert of the big run (setup) | {s['bulk_insert_s']:.1f} s |",
        "",
        "| goal | met | measured |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {'yes' if ok else '**no**'} | {detail} |" for name, ok, detail in checks]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--per-writer", type=int, default=500)
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="replace the ## ledger section of bench/RESULTS.md",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="charter-bench-") as tmp:
        res: dict[str, Any] = {"events": args.events, "samples": args.samples}
        res["sqlite"] = asyncio.run(sqlite_suite(Path(tmp), args))
        res["postgres"] = asyncio.run(postgres_suite(args))
    checks = goals(res)
    res["goals"] = [{"goal": n, "met": ok, "measured": d} for n, ok, d in checks]
    section = render(res, checks)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(section)
    if args.write_results:
        write_section("## ledger", section)
    if args.check and not all(ok for _, ok, _ in checks):
        print("goals missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
