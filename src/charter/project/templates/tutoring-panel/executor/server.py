"""The tutoring executor: a separate process serving executor/tutoring.py over
``charter.executor.v1``.

    python executor/server.py --port 8765

It reads its bearer credential and signing key from the files `charter init` made
(``.charter/secrets/executor.credential``, ``.charter/secrets/executor.signing.key``) unless
``CHARTER_EXECUTOR_CREDENTIAL`` / ``CHARTER_EXECUTOR_SIGNING_KEY`` are set, keeps its
idempotency journal in ``data/executor-journal.db`` and its business data in
``data/tutoring.db`` (seeded on first start).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import charter.remote  # noqa: E402 - the project root must be importable first
from executor import tutoring  # noqa: E402

SECRETS = ROOT / ".charter" / "secrets"


def _secret(env: str, file: str) -> bytes:
    value = os.environ.get(env)
    return value.encode() if value else (SECRETS / file).read_bytes().strip()


def build_app() -> object:
    tutoring.seed()
    return charter.remote.app(
        tutoring,
        name="tutoring-executor",
        version="1.0.0",
        credential=_secret("CHARTER_EXECUTOR_CREDENTIAL", "executor.credential"),
        signing_key=_secret("CHARTER_EXECUTOR_SIGNING_KEY", "executor.signing.key"),
        journal=ROOT / "data" / "executor-journal.db",
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    uvicorn.run(build_app(), host=args.host, port=args.port, log_level="warning")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
