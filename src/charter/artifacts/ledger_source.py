"""An artifact store as the ledger's source of artifact files (for verify and export).

The ledger never imports this package; callers hand it the function this module builds. The
ledger hashes what it reads; the store's own refusals become
:class:`~charter.ledger.verify.ArtifactUnreadable` (missing, or not a plain file).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

from charter.artifacts.ports import ArtifactStore
from charter.errors import Failure
from charter.ledger.verify import ArtifactSource, ArtifactUnreadable

_CHUNK = 1 << 20
_MISSING = frozenset({"ARTIFACT_NOT_FOUND", "ARTIFACT_NOT_DIRECTORY"})
_IRREGULAR = frozenset(
    {"ARTIFACT_SYMLINK", "ARTIFACT_HARDLINK", "ARTIFACT_NOT_REGULAR", "ARTIFACT_INTEGRITY_MISMATCH"}
)


def store_source(open_store: Callable[[], ArtifactStore], run_id: str) -> ArtifactSource:
    """Read ``run_id``'s artifact files through the store ``open_store`` builds (on first use)."""
    store = functools.cache(open_store)

    def chunks(path: str) -> Iterator[bytes]:
        try:
            with store().open_read(run_id, path) as reader:
                while chunk := reader.read(_CHUNK):
                    yield chunk
        except Failure as exc:
            if exc.reason in _MISSING:
                raise ArtifactUnreadable(missing=True) from None
            if exc.reason in _IRREGULAR:
                raise ArtifactUnreadable(missing=False) from None
            raise

    return chunks
