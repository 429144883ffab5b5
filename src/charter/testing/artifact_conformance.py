"""The artifact conformance suites: every store and every registry must pass exactly these.

Plain classes: each ``test_*`` method takes its inputs as arguments — ``store`` (a fresh
store, ``backend.make()``) and ``backend`` (a :class:`Backend`) for
:class:`ArtifactStoreConformance`, ``registry`` (a fresh, empty registry whose runs
``run-reg`` and ``run-other`` may be written) for :class:`RegistryConformance` — and a method
named in the class's ``PARAMETERS`` runs once per row of its table. Nothing here imports
pytest; ``tests/conformance.py`` is the pytest runner::

    class TestMyStore(ArtifactStoreSuite):      # the runner's fixtures and parametrization
        @pytest.fixture
        def backend(self) -> Backend:
            return MyBackend()      # make(), names(), tamper() — see Backend

    class TestMyRegistry(RegistrySuite):
        @pytest.fixture
        def registry(self) -> ArtifactRegistry:
            return MyRegistry()

The async tests need an event loop (anyio's pytest plugin in the runner).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from charter.artifacts.ports import ArtifactRegistry, ArtifactStore, ArtifactWriter
from charter.artifacts.records import ArtifactRecord, Producer, StagingLimits, Trust
from charter.artifacts.registry import MemoryRegistry
from charter.artifacts.service import ArtifactService
from charter.artifacts.usage import Totals
from charter.errors import Failure
from charter.testing.clock import FakeClock
from charter.testing.raises import Raised, raises


class Backend(Protocol):
    """How the suite makes a store and looks behind its back."""

    def make(
        self,
        *,
        quota_bytes: int | None = None,
        max_file_bytes: int | None = None,
        quota_files: int | None = None,
    ) -> ArtifactStore:
        """A fresh, empty store."""
        ...

    def names(self, store: ArtifactStore, run_id: str) -> set[str]:
        """Every file physically under the run (staging included), as run-relative names."""
        ...

    def tamper(self, store: ArtifactStore, run_id: str, path: str, data: bytes) -> None:
        """Replace a published file's content behind the store's back."""
        ...


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def reason_of(info: Raised[Failure]) -> str:
    return info.value.reason


def _fail_inside(writer: ArtifactWriter) -> None:
    with writer:
        writer.write(b"half of it")
        raise RuntimeError("the tool failed")


RUN = "run-conf"
HOSTILE = [
    ("../x.txt", "ARTIFACT_PATH_TRAVERSAL"),
    ("a/../../x.txt", "ARTIFACT_PATH_TRAVERSAL"),
    ("/etc/passwd", "ARTIFACT_PATH_ABSOLUTE"),
    ("C:\\Windows\\x", "ARTIFACT_PATH_ABSOLUTE"),
    ("a\\..\\x", "ARTIFACT_PATH_BACKSLASH"),
    ("%2e%2e/x.txt", "ARTIFACT_PATH_ENCODED"),
    ("a\x00b.txt", "ARTIFACT_PATH_CONTROL_CHAR"),
    ("a//b.txt", "ARTIFACT_PATH_EMPTY_COMPONENT"),
    ("\u2024\u2024/x.txt", "ARTIFACT_PATH_LOOKALIKE"),
    ("manifest.json", "ARTIFACT_PATH_RESERVED"),
    ("events/00000001.jsonl", "ARTIFACT_PATH_RESERVED"),
    ("artifacts/index.json", "ARTIFACT_PATH_RESERVED"),
    (".staging/w-1", "ARTIFACT_PATH_RESERVED"),
    ("x" * 256, "ARTIFACT_NAME_TOO_LONG"),
    ("s3://someone-else/charter/artifacts/run-conf/x.txt", "ARTIFACT_BUCKET_FOREIGN"),
    ("file:///etc/passwd", "ARTIFACT_PATH_SCHEME"),
    # not portable: Windows device names, NTFS streams, blank parts, trailing dots and spaces
    ("CON", "ARTIFACT_PATH_DEVICE_NAME"),
    ("nul.txt", "ARTIFACT_PATH_DEVICE_NAME"),
    ("COM1", "ARTIFACT_PATH_DEVICE_NAME"),
    ("aux.json", "ARTIFACT_PATH_DEVICE_NAME"),
    ("LPT1.log", "ARTIFACT_PATH_DEVICE_NAME"),
    ("sub/Con.tar.gz", "ARTIFACT_PATH_DEVICE_NAME"),
    ("report.txt:hidden", "ARTIFACT_PATH_COLON"),
    ("report.txt::$DATA", "ARTIFACT_PATH_COLON"),
    (" ", "ARTIFACT_PATH_BLANK_COMPONENT"),
    ("a/ /b", "ARTIFACT_PATH_BLANK_COMPONENT"),
    ("report.txt.", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("report.txt ", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
    ("dir./x.txt", "ARTIFACT_PATH_TRAILING_DOT_OR_SPACE"),
]
NFC = "caf\u00e9.txt"
NFD = "cafe\u0301.txt"

DOTTED_NAMES = [("[...slug].ts",), ("a..b.txt",), ("..a",), ("v1.2/x..y",), ("ü/日本.txt",)]
BAD_RUN_IDS = [("../run",), ("",), ("a/b",), (".hidden",), ("run\x00",)]
REFUSED_STAGING: list[tuple[dict[str, str] | None, StagingLimits | None, str]] = [
    ({"x.txt": sha(b"other"), "y.txt": sha(b"y")}, None, "ARTIFACT_INTEGRITY_MISMATCH"),
    ({"x.txt": sha(b"x")}, None, "ARTIFACT_STAGING_UNDECLARED"),
    ({"x.txt": sha(b"x"), "y.txt": sha(b"y"), "z": sha(b"")}, None, "ARTIFACT_NOT_FOUND"),
    (None, StagingLimits(max_files=1), "ARTIFACT_TOO_LARGE"),
    (None, StagingLimits(max_file_bytes=0), "ARTIFACT_TOO_LARGE"),
    (None, StagingLimits(max_total_bytes=1), "ARTIFACT_TOO_LARGE"),
]


class ArtifactStoreConformance:
    """Behaviour every :class:`~charter.artifacts.ports.ArtifactStore` must have."""

    PARAMETERS: ClassVar[Mapping[str, tuple[tuple[str, ...], Sequence[tuple[Any, ...]]]]] = {
        "test_hostile_paths_are_refused_by_every_method": (("path", "reason"), HOSTILE),
        "test_names_with_dots_and_unicode_are_accepted": (("path",), DOTTED_NAMES),
        "test_run_ids_are_identifiers": (("run_id",), BAD_RUN_IDS),
        "test_refused_staging_publishes_nothing": (
            ("expected", "limits", "reason"),
            REFUSED_STAGING,
        ),
    }
    """Methods that run once per row: argument names, then the rows."""

    # -- writes and reads -------------------------------------------------------------------

    def test_put_then_read_round_trips(self, store: ArtifactStore) -> None:
        stored = store.put(RUN, "reports/summary.md", b"# hello\n")
        assert stored.path == "reports/summary.md"
        assert (stored.sha256, stored.size) == (sha(b"# hello\n"), 8)
        assert store.read_bytes(RUN, "reports/summary.md", expected_sha256=stored.sha256) == (
            b"# hello\n"
        )
        assert store.checksum(RUN, "reports/summary.md") == stored

    def test_writer_streams_small_and_large_chunks(self, store: ArtifactStore) -> None:
        chunks: list[bytes | bytearray | memoryview] = [
            b"a" * 10,
            b"b" * (300 * 1024),
            bytearray(b"c" * 7),
            memoryview(b"d" * 5000),
        ]
        with store.open_write(RUN, "data/blob.bin") as writer:
            for chunk in chunks:
                assert writer.write(chunk) == len(chunk)
        whole = b"".join(bytes(c) for c in chunks)
        assert writer.result.sha256 == sha(whole)
        with store.open_read(RUN, "data/blob.bin", expected_sha256=sha(whole)) as reader:
            assert b"".join(reader) == whole

    def test_empty_file(self, store: ArtifactStore) -> None:
        stored = store.put(RUN, "empty.txt", b"")
        assert store.read_bytes(RUN, "empty.txt", expected_sha256=stored.sha256) == b""

    def test_file_is_invisible_until_its_writer_closes(self, store: ArtifactStore) -> None:
        with store.open_write(RUN, "late.txt") as writer:
            writer.write(b"not yet")
            assert store.stat(RUN, "late.txt") is None
            assert [i.path for i in store.list(RUN)] == []
        info = store.stat(RUN, "late.txt")
        assert info is not None
        assert info.size == 7

    def test_failing_writer_leaves_nothing(self, store: ArtifactStore, backend: Backend) -> None:
        store.put(RUN, "keep.txt", b"keep")
        before = backend.names(store, RUN)
        writer = store.open_write(RUN, "part/ial.txt")
        with raises(RuntimeError):
            _fail_inside(writer)
        assert store.stat(RUN, "part/ial.txt") is None
        assert backend.names(store, RUN) == before
        writer2 = store.open_write(RUN, "aborted.txt")
        writer2.write(b"x")
        writer2.abort()
        assert backend.names(store, RUN) == before
        with raises(Failure) as info:
            _ = writer2.result
        assert reason_of(info) == "ARTIFACT_NOT_PUBLISHED"

    def test_writes_are_create_only(self, store: ArtifactStore, backend: Backend) -> None:
        store.put(RUN, "once.txt", b"first")
        before = backend.names(store, RUN)
        with raises(Failure) as info:
            store.put(RUN, "once.txt", b"second")
        assert reason_of(info) == "ARTIFACT_EXISTS"
        assert store.read_bytes(RUN, "once.txt") == b"first"
        assert backend.names(store, RUN) == before

    def test_versioned_writes_take_the_first_free_name(self, store: ArtifactStore) -> None:
        names = [store.put(RUN, "plots/plot.png", b"%d" % i, versioned=True).path for i in range(3)]
        assert names == ["plots/plot.png", "plots/plot-v2.png", "plots/plot-v3.png"]
        assert store.first_free_path(RUN, "plots/plot.png") == "plots/plot-v4.png"
        assert store.first_free_path(RUN, "gtm.pkl.gz") == "gtm.pkl.gz"
        store.put(RUN, "gtm.pkl.gz", b"g")
        store.put(RUN, "README", b"r")
        assert store.first_free_path(RUN, "gtm.pkl.gz") == "gtm-v2.pkl.gz"
        assert store.first_free_path(RUN, "README") == "README-v2"
        assert store.read_bytes(RUN, "plots/plot-v2.png") == b"1"

    # -- verification -----------------------------------------------------------------------

    def test_reads_verify_the_expected_checksum(self, store: ArtifactStore) -> None:
        stored = store.put(RUN, "v.txt", b"value")
        with raises(Failure) as info:
            store.read_bytes(RUN, "v.txt", expected_sha256=sha(b"other"))
        assert reason_of(info) == "ARTIFACT_INTEGRITY_MISMATCH"
        with raises(Failure) as info:
            store.open_read(RUN, "v.txt", expected_sha256=stored.sha256, expected_size=99)
        assert reason_of(info) == "ARTIFACT_INTEGRITY_MISMATCH"

    def test_a_changed_file_fails_verification(
        self, store: ArtifactStore, backend: Backend
    ) -> None:
        stored = store.put(RUN, "t.csv", b"a,b\n1,2\n")
        backend.tamper(store, RUN, "t.csv", b"a,b\n6,6\n")
        with raises(Failure) as info:
            store.read_bytes(RUN, "t.csv", expected_sha256=stored.sha256)
        assert reason_of(info) == "ARTIFACT_INTEGRITY_MISMATCH"
        assert store.checksum(RUN, "t.csv").sha256 == sha(b"a,b\n6,6\n")

    def test_missing_files(self, store: ArtifactStore) -> None:
        assert store.stat(RUN, "none.txt") is None
        assert store.stat("run-never", "none.txt") is None
        assert store.list("run-never") == []
        with raises(Failure) as info:
            store.read_bytes(RUN, "none.txt")
        assert reason_of(info) == "ARTIFACT_NOT_FOUND"
        with raises(Failure) as info:
            store.read_bytes("run-never", "none/deeper.txt")
        assert reason_of(info) == "ARTIFACT_NOT_FOUND"

    def test_list_is_sorted_filtered_and_never_shows_staging(self, store: ArtifactStore) -> None:
        for path in ("b.txt", "a/2.txt", "a/1.txt"):
            store.put(RUN, path, b"x")
        area = store.open_staging(RUN, "call-list", 1)
        with store.stage(area, "staged.txt") as writer:
            writer.write(b"s")
        assert [(i.path, i.size) for i in store.list(RUN)] == [
            ("a/1.txt", 1),
            ("a/2.txt", 1),
            ("b.txt", 1),
        ]
        assert [i.path for i in store.list(RUN, "a/")] == ["a/1.txt", "a/2.txt"]

    def test_runs_are_separate(self, store: ArtifactStore) -> None:
        store.put("run-one", "same.txt", b"one")
        store.put("run-two", "same.txt", b"two")
        assert store.read_bytes("run-one", "same.txt") == b"one"
        assert store.read_bytes("run-two", "same.txt") == b"two"

    # -- refusals ---------------------------------------------------------------------------

    def test_hostile_paths_are_refused_by_every_method(
        self, store: ArtifactStore, backend: Backend, path: str, reason: str
    ) -> None:
        attempts: list[Callable[[], object]] = [
            lambda: store.put(RUN, path, b"x"),
            lambda: store.open_write(RUN, path),
            lambda: store.read_bytes(RUN, path),
            lambda: store.stat(RUN, path),
            lambda: store.checksum(RUN, path),
            lambda: store.first_free_path(RUN, path),
        ]
        for attempt in attempts:
            with raises(Failure) as info:
                attempt()
            assert reason_of(info) == reason
        assert backend.names(store, RUN) == set()

    def test_names_with_dots_and_unicode_are_accepted(
        self, store: ArtifactStore, path: str
    ) -> None:
        store.put(RUN, path, b"ok")
        assert store.read_bytes(RUN, path) == b"ok"
        assert [i.path for i in store.list(RUN)] == [path]

    def test_nfc_and_nfd_spellings_are_one_name(
        self, store: ArtifactStore, backend: Backend
    ) -> None:
        assert store.put(RUN, NFD, b"first").path == NFC
        with raises(Failure) as info:
            store.put(RUN, NFC, b"second")
        assert reason_of(info) == "ARTIFACT_EXISTS"
        assert store.put(RUN, NFD, b"third", versioned=True).path == "caf\u00e9-v2.txt"
        assert store.read_bytes(RUN, NFD) == b"first"
        assert store.first_free_path(RUN, NFD) == "caf\u00e9-v3.txt"
        assert [i.path for i in store.list(RUN)] == ["caf\u00e9-v2.txt", NFC]
        assert backend.names(store, RUN) == {NFC, "caf\u00e9-v2.txt"}

    def test_staged_names_are_published_in_nfc(
        self, store: ArtifactStore, backend: Backend
    ) -> None:
        area = store.open_staging(RUN, "call-nfc", 1)
        with store.stage(area, NFD) as writer:
            writer.write(b"staged")
        published = store.accept_staging(area, attempt=1)
        assert [obj.path for obj in published] == [NFC]
        assert store.read_bytes(RUN, NFC) == b"staged"

    def test_run_ids_are_identifiers(self, store: ArtifactStore, run_id: str) -> None:
        with raises(Failure) as info:
            store.put(run_id, "x.txt", b"x")
        assert reason_of(info) == "INVALID_IDENTIFIER"

    def test_quota_and_file_limit(self, backend: Backend) -> None:
        store = backend.make(quota_bytes=100, max_file_bytes=80)
        store.put(RUN, "a.bin", b"a" * 60)
        before = backend.names(store, RUN)
        with raises(Failure) as info:
            store.put(RUN, "b.bin", b"b" * 50)
        assert reason_of(info) == "ARTIFACT_QUOTA_EXCEEDED"
        with raises(Failure) as info:
            store.put("run-other", "c.bin", b"c" * 81)
        assert reason_of(info) == "ARTIFACT_TOO_LARGE"
        assert backend.names(store, RUN) == before
        assert store.put(RUN, "d.bin", b"d" * 40).size == 40

    def test_file_count_quota(self, backend: Backend) -> None:
        store = backend.make(quota_files=3)
        for name in ("a", "b", "c"):
            store.put(RUN, f"{name}.txt", b"x")
        before = backend.names(store, RUN)
        with raises(Failure) as info:
            store.put(RUN, "d.txt", b"x")
        assert reason_of(info) == "ARTIFACT_QUOTA_FILES_EXCEEDED"
        assert info.value.code == "resource_limit"
        area = store.open_staging(RUN, "call-q", 1)
        with store.stage(area, "e.txt") as writer:  # staged files count once accepted
            writer.write(b"x")
        with raises(Failure) as info:
            store.accept_staging(area, attempt=1)
        assert reason_of(info) == "ARTIFACT_QUOTA_FILES_EXCEEDED"
        assert backend.names(store, RUN) == before
        assert store.put("run-other", "d.txt", b"x").size == 1  # per run

    def test_usage_is_kept_as_running_totals(self, backend: Backend) -> None:
        store = backend.make(quota_bytes=100, quota_files=50)
        usage = store.usage_totals  # type: ignore[attr-defined]
        measured: list[str] = []
        measure = usage._measure

        def counting(run_id: str) -> object:
            measured.append(run_id)
            return measure(run_id)

        usage._measure = counting
        written = [store.put(RUN, f"f{i}.bin", b"x" * 2) for i in range(40)]
        assert measured == [RUN]  # one walk or listing for the run, not one per write
        assert usage.totals(RUN) == Totals(files=40, bytes=80)
        with raises(Failure) as info:
            store.put(RUN, "big.bin", b"x" * 21)
        assert reason_of(info) == "ARTIFACT_QUOTA_EXCEEDED"
        store.discard(RUN, written[:10])  # a rollback gives the room back
        assert usage.totals(RUN) == Totals(files=30, bytes=60)
        assert store.put(RUN, "big.bin", b"x" * 21).size == 21
        assert measured == [RUN]

    # -- rollback ---------------------------------------------------------------------------

    def test_discard_removes_only_what_still_matches(
        self, store: ArtifactStore, backend: Backend
    ) -> None:
        mine = store.put(RUN, "mine.txt", b"mine")
        changed = store.put(RUN, "changed.txt", b"before")
        backend.tamper(store, RUN, "changed.txt", b"after")
        gone = store.put(RUN, "gone.txt", b"gone")
        assert store.discard(RUN, [gone]) == ("gone.txt",)
        removed = store.discard(RUN, [mine, changed, gone])
        assert removed == ("mine.txt",)
        assert [i.path for i in store.list(RUN)] == ["changed.txt"]

    # -- staging ----------------------------------------------------------------------------

    def test_staging_is_accepted_with_declared_checksums(
        self, store: ArtifactStore, backend: Backend
    ) -> None:
        files = {"out/a.csv": b"1,2\n", "out/b.png": b"\x89PNG"}
        area = store.open_staging(RUN, "call-7", 2)
        for path, data in files.items():
            with store.stage(area, path) as writer:
                writer.write(data)
        accepted = store.accept_staging(
            area, attempt=2, expected={p: sha(d) for p, d in files.items()}
        )
        assert sorted(o.path for o in accepted) == ["out/a.csv", "out/b.png"]
        assert store.read_bytes(RUN, "out/a.csv", expected_sha256=sha(b"1,2\n")) == b"1,2\n"
        assert backend.names(store, RUN) == {"out/a.csv", "out/b.png"}

    def test_stale_attempt_is_discarded(self, store: ArtifactStore, backend: Backend) -> None:
        area = store.open_staging(RUN, "call-7", 1)
        with store.stage(area, "x.txt") as writer:
            writer.write(b"old attempt")
        with raises(Failure) as info:
            store.accept_staging(area, attempt=2)
        assert reason_of(info) == "ARTIFACT_ATTEMPT_STALE"
        assert backend.names(store, RUN) == set()

    def test_refused_staging_publishes_nothing(
        self,
        store: ArtifactStore,
        backend: Backend,
        expected: dict[str, str] | None,
        limits: StagingLimits | None,
        reason: str,
    ) -> None:
        area = store.open_staging(RUN, "call-7", 1)
        for path in ("x.txt", "y.txt"):
            with store.stage(area, path) as writer:
                writer.write(path[0].encode())
        with raises(Failure) as info:
            store.accept_staging(area, attempt=1, expected=expected, limits=limits)
        assert reason_of(info) == reason
        assert backend.names(store, RUN) == set()

    def test_staging_never_overwrites(self, store: ArtifactStore, backend: Backend) -> None:
        store.put(RUN, "b.txt", b"original")
        area = store.open_staging(RUN, "call-7", 1)
        for path in ("a.txt", "b.txt", "c.txt"):
            with store.stage(area, path) as writer:
                writer.write(b"staged")
        with raises(Failure) as info:
            store.accept_staging(area, attempt=1)
        assert reason_of(info) == "ARTIFACT_EXISTS"
        assert backend.names(store, RUN) == {"b.txt"}
        assert store.read_bytes(RUN, "b.txt") == b"original"

    def test_staging_area_is_per_call_attempt(self, store: ArtifactStore) -> None:
        area = store.open_staging(RUN, "call-7", 1)
        with store.stage(area, "x.txt") as writer:
            writer.write(b"x")
        with raises(Failure) as info:
            store.open_staging(RUN, "call-7", 1)
        assert reason_of(info) == "ARTIFACT_STAGING_EXISTS"
        store.discard_staging(area)
        store.discard_staging(area)  # idempotent
        assert store.list(RUN) == []

    # -- immutability through the service ---------------------------------------------------

    async def test_a_registered_artifact_cannot_be_overwritten_through_any_path(
        self, store: ArtifactStore, backend: Backend
    ) -> None:
        service = ArtifactService(store=store, registry=MemoryRegistry(), clock=FakeClock())
        stored = await service.write_bytes(RUN, "results/table.csv", b"id\n1\n")
        record = await service.register(
            RUN,
            stored,
            type="table",
            media_type="text/csv",
            producer=Producer(task_id="t", tool_id="tool.x", call_id="c-1"),
            trust=Trust.INTERNAL,
        )
        with raises(Failure) as info:
            await service.write_bytes(RUN, "results/table.csv", b"id\n2\n")
        assert reason_of(info) == "ARTIFACT_IMMUTABLE"
        for alias in (
            "./results/table.csv",
            "results/./table.csv",
            "results//table.csv",
            "x/../results/table.csv",
            "results/%74able.csv",
            "results\\table.csv",
            "/results/table.csv",
            "results/table.csv/",
            "results\u2215table.csv",
        ):
            with raises(Failure):
                await service.write_bytes(RUN, alias, b"id\n3\n")
        again = await service.write_bytes(RUN, "results/table.csv", b"id\n4\n", versioned=True)
        assert again.path == "results/table-v2.csv"
        area = store.open_staging(RUN, "call-9", 1)
        with store.stage(area, "results/table.csv") as writer:
            writer.write(b"id\n5\n")
        with raises(Failure) as info:
            await service.accept_staging(area, attempt=1)
        assert reason_of(info) == "ARTIFACT_EXISTS"
        assert await service.rollback(RUN, [stored, again]) == ("results/table-v2.csv",)
        assert await service.read_bytes(RUN, record.artifact_id) == b"id\n1\n"
        assert backend.names(store, RUN) == {"results/table.csv"}


def _record(artifact_id: str, path: str, *, digest: str | None = None) -> ArtifactRecord:
    return ArtifactRecord(
        artifact_id=artifact_id,
        run_id="run-reg",
        type="table",
        media_type="text/csv",
        path=path,
        sha256=digest or sha(path.encode()),
        size=3,
        producer=Producer(task_id="t", tool_id="tool.x", call_id="c-1"),
        trust=Trust.INTERNAL,
        created_at="2025-01-01T00:00:00.000000Z",
    )


REGISTRY_RUNS = ("run-reg", "run-other")
"""The runs :class:`RegistryConformance` registers in or looks up (a ledger-backed registry's
store must have them created)."""


class RegistryConformance:
    """Behaviour every :class:`~charter.artifacts.ports.ArtifactRegistry` must have."""

    async def test_register_get_list(self, registry: ArtifactRegistry) -> None:
        a = await registry.register(_record("art-1", "a.csv"))
        b = await registry.register(_record("art-2", "b.csv"))
        assert await registry.get("run-reg", "art-1") == a
        assert await registry.by_path("run-reg", "b.csv") == b
        assert await registry.get("run-reg", "art-3") is None
        assert await registry.by_path("run-other", "a.csv") is None
        assert list(await registry.list("run-reg")) == [a, b]

    async def test_reregistering_identical_content_returns_the_first(
        self, registry: ArtifactRegistry
    ) -> None:
        first = await registry.register(_record("art-1", "a.csv"))
        retried = _record("art-9", "a.csv")
        assert await registry.register(retried) == first
        assert list(await registry.list("run-reg")) == [first]

    async def test_different_content_at_a_registered_path_is_refused(
        self, registry: ArtifactRegistry
    ) -> None:
        await registry.register(_record("art-1", "a.csv"))
        with raises(Failure) as info:
            await registry.register(_record("art-2", "a.csv", digest=sha(b"changed")))
        assert reason_of(info) == "ARTIFACT_IMMUTABLE"

    async def test_an_artifact_id_names_one_path(self, registry: ArtifactRegistry) -> None:
        await registry.register(_record("art-1", "a.csv"))
        with raises(Failure) as info:
            await registry.register(_record("art-1", "b.csv"))
        assert reason_of(info) == "ARTIFACT_ID_CONFLICT"
