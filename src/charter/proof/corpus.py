"""The regression corpus: every obligation a promoted Build took on, kept for good.

An :class:`Obligation` is one context test or incident guard, content-addressed: its
``digest`` is ``sha256:`` over the RFC 8785 canonical JSON of the test without the file it
came from (moving a test to another file does not change it; editing it does, and then the
old version and the new one are both obligations). A :class:`Corpus` is the set of
obligations of an environment, keyed by digest; each promotion stores the whole corpus it
leaves behind in the ledger (:mod:`charter.proof.promote`), so a test whose file a later
candidate deletes is still run against every later candidate. Only an operator's recorded
:class:`Waiver` drops obligations, by name (every version of it) or by digest.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from charter.contracts.canonical import canonical_bytes
from charter.errors import UserError
from charter.project.suite import TEST_NAME, ContextTest

KINDS = ("test", "guard")


def obligation_digest(test: ContextTest) -> str:
    """The content address of a context test (its source file excluded)."""
    body = test.model_dump(mode="json", exclude={"source"})
    return "sha256:" + hashlib.sha256(canonical_bytes(body)).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Obligation:
    name: str
    kind: str  # test | guard
    digest: str
    since: str  # the digest of the Build whose promotion took it on
    test: ContextTest

    @classmethod
    def of(cls, test: ContextTest, *, kind: str, since: str) -> Obligation:
        return cls(
            name=test.name, kind=kind, digest=obligation_digest(test), since=since, test=test
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "digest": self.digest,
            "since": self.since,
            "test": self.test.model_dump(mode="json"),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Obligation:
        test = ContextTest.model_validate(data["test"])
        ob = cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            digest=str(data["digest"]),
            since=str(data["since"]),
            test=test,
        )
        if ob.kind not in KINDS or ob.name != test.name or obligation_digest(test) != ob.digest:
            raise UserError(
                f"the recorded obligation {ob.name!r} does not match its digest {ob.digest}"
            )
        return ob


@dataclass(frozen=True, slots=True, kw_only=True)
class Corpus:
    obligations: tuple[Obligation, ...] = ()

    @property
    def digest(self) -> str:
        """``sha256:`` over the sorted obligation digests: the corpus's content address."""
        joined = "\n".join(sorted(o.digest for o in self.obligations)).encode("ascii")
        return "sha256:" + hashlib.sha256(joined).hexdigest()

    def digests(self) -> frozenset[str]:
        return frozenset(o.digest for o in self.obligations)

    def grown(self, more: Iterable[Obligation]) -> Corpus:
        """This corpus with ``more`` added (an obligation already held keeps its ``since``)."""
        held = {o.digest: o for o in self.obligations}
        for o in more:
            held.setdefault(o.digest, o)
        return Corpus(obligations=tuple(sorted(held.values(), key=lambda o: (o.name, o.digest))))

    def without(self, digests: frozenset[str]) -> Corpus:
        return Corpus(obligations=tuple(o for o in self.obligations if o.digest not in digests))

    def to_list(self) -> list[dict[str, Any]]:
        return [o.to_dict() for o in self.obligations]

    @classmethod
    def from_list(cls, data: Iterable[Mapping[str, Any]]) -> Corpus:
        return cls().grown(Obligation.from_dict(d) for d in data)


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiver:
    """An operator's recorded decision to drop an obligation from the corpus."""

    name: str  # a test name (every version of it) or one obligation's digest
    reason: str
    by: str  # the operator principal

    def __post_init__(self) -> None:
        if not (TEST_NAME.match(self.name) or self.name.startswith("sha256:")):
            raise UserError(f"--waive {self.name!r}: give a test name or an obligation digest")
        if not self.reason.strip():
            raise UserError(f"waiving {self.name!r} needs a --reason")
        if not self.by.strip():
            raise UserError(f"waiving {self.name!r} needs the operator (--as)")

    def matches(self, ob: Obligation) -> bool:
        return ob.digest == self.name if self.name.startswith("sha256:") else ob.name == self.name

    def to_dict(self, dropped: Iterable[str]) -> dict[str, Any]:
        return {"name": self.name, "reason": self.reason, "by": self.by, "dropped": sorted(dropped)}


def apply_waivers(corpus: Corpus, waivers: Iterable[Waiver]) -> tuple[Corpus, list[dict[str, Any]]]:
    """``corpus`` without what ``waivers`` drop, and the waiver records (what each dropped).

    A waiver that matches nothing in the corpus is an error: a typo must not be recorded as
    a waiver that silently did nothing.
    """
    records = []
    dropped: set[str] = set()
    for w in waivers:
        hit = {o.digest for o in corpus.obligations if w.matches(o)}
        if not hit:
            names = ", ".join(sorted({o.name for o in corpus.obligations})) or "none"
            raise UserError(
                f"--waive {w.name!r}: the environment's corpus holds no such obligation "
                f"(it holds: {names})"
            )
        dropped |= hit
        records.append(w.to_dict(hit))
    return corpus.without(frozenset(dropped)), records
