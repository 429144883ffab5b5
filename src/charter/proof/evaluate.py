"""The replay evaluator: findings about a recorded run, never a comparison of prose.

:func:`evaluate_events` reads a run's events (``{seq, type, payload}`` in seq order) and the
workflow contract pinned in its ``run_created`` event, and reports :class:`Finding` s:

* ``milestone_missing`` — a task of the pinned workflow never reached ``completed``;
* ``role_mismatch`` / ``profile_mismatch`` — a call inside a task came from a context of
  another agent (when the role is an agent of the context's Build) or profile;
* ``tool_outside_task`` — a call inside a task used a tool the task contract does not list;
* ``preflight_order`` — a call of another tool ran before every ``preflight_tools`` entry had
  a successful call;
* ``duplicate_success`` — the same tool with the same argument fingerprint succeeded more than
  once in the run (under different call ids: a repeated call id is a receipt, not a call);
* ``artifact_type_unexpected`` — an artifact whose type the workflow does not declare, or that
  a task registered outside its own ``output_artifacts``;
* ``terminal_status`` — the run did not end, or ended other than ``completed``.

Ad-hoc runs (no pinned workflow) get only the duplicate and terminal-status checks. Pure: no
I/O; :func:`evaluate_run` reads the events from a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from charter.errors import InvalidInput
from charter.ledger.ports import Store
from charter.project.catalog import CatalogEntry
from charter.project.pinning import pinned_entry
from charter.proof.replay import read_events

TERMINAL = frozenset({"completed", "partial", "failed", "cancelled"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    kind: str
    message: str
    seq: int | None = None
    task_id: str | None = None
    call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    run_id: str
    workflow: str | None
    status: str | None
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.findings

    def kinds(self) -> list[str]:
        return [f.kind for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
        }


def evaluate_events(
    run_id: str, events: Sequence[Mapping[str, Any]], *, agents: frozenset[str] | None = None
) -> Evaluation:
    """``agents``: agent names of the Build (a task role that is one must match the context)."""
    evaluator = Evaluator(run_id, agents=agents)
    for ev in events:
        evaluator.add(ev)
    return evaluator.result()


class Evaluator:
    """:func:`evaluate_events` one event at a time: :meth:`add` each event in seq order, then
    :meth:`result` (a verified replay feeds it as verification parses each event)."""

    def __init__(self, run_id: str, *, agents: frozenset[str] | None = None) -> None:
        self.run_id = run_id
        self.agents = agents
        self.findings: list[Finding] = []
        self.entry: CatalogEntry | None = None
        self.contexts: dict[str, Mapping[str, Any]] = {}
        # Keyed by one level per part rather than by tuples: a run's calls would otherwise
        # leave tens of thousands of tuples for the cyclic collector to traverse afterwards.
        # context -> call -> the started intent's tool, fingerprint and task
        self.intents: dict[Any, dict[Any, tuple[Any, Any, Any]]] = {}
        self.succeeded: dict[str, dict[str, tuple[Any, int]]] = {}  # tool -> fp -> call, seq
        self.completed: set[str] = set()
        self.preflight_done: set[str] = set()
        self.status: str | None = None

    def add(self, ev: Mapping[str, Any]) -> None:
        self.take(ev["type"], ev["payload"], ev["seq"])

    def take(self, typ: Any, p: Any, seq: Any) -> None:
        """:meth:`add` given the event's ``type``, ``payload`` and ``seq`` (a verified replay
        hands them over without building the event's document)."""
        seq = int(seq)
        if typ == "tool_progress":  # most events: test it first
            stage = p.get("stage")
            if stage == "started":
                self._started(p, seq)
            elif stage == "completed":
                self._completed(p, seq)
        elif typ == "tool_call_recorded":  # the next most common: nothing to evaluate
            pass
        elif typ == "run_created":
            wf = p.get("workflow")
            if isinstance(wf, Mapping) and "entries" in wf:
                self.entry = pinned_entry(wf)
        elif typ == "run_status_changed":
            self.status = p.get("status")
        elif typ == "task_status_changed" and p.get("status") == "completed":
            self.completed.add(str(p.get("task_id")))
        elif typ == "context_resolved":
            self.contexts[p["context_id"]] = p
        elif typ == "artifact_registered" and self.entry is not None:
            self.findings += _artifact_findings(self.entry, p, seq)

    def _started(self, p: Mapping[str, Any], seq: int) -> None:
        context, call = p.get("context_id", ""), p.get("call_id", "")
        if type(context) is not str or type(call) is not str:
            hash((context, call))  # an unhashable id raises here, as a (context, call) key would
        by_call = self.intents.get(context)
        if by_call is None:
            by_call = self.intents[context] = {}
        by_call[call] = (p.get("tool_id"), p.get("fingerprint"), p.get("task_id"))
        if self.entry is not None:
            self.findings += _call_findings(
                self.entry, p, self.contexts.get(context), self.preflight_done, seq, self.agents
            )

    def _completed(self, p: Mapping[str, Any], seq: int) -> None:
        context, call = p.get("context_id", ""), p.get("call_id", "")
        if type(context) is not str or type(call) is not str:
            hash((context, call))  # as in _started
        by_call = self.intents.get(context)
        intent = None if by_call is None else by_call.get(call)
        if intent is None:
            return
        tool_id, fingerprint, task_id = intent
        tool = str(tool_id)
        self.preflight_done.add(tool)
        fp = str(fingerprint)
        by_fp = self.succeeded.get(tool)
        if by_fp is None:
            by_fp = self.succeeded[tool] = {}
        if fp in by_fp:
            first, first_seq = by_fp[fp]
            self.findings.append(
                Finding(
                    kind="duplicate_success",
                    message=f"{tool} succeeded again with the same arguments "
                    f"(first as {first} at seq {first_seq})",
                    seq=seq,
                    call_id=call,
                    task_id=task_id,
                )
            )
        else:
            by_fp[fp] = (call, seq)

    def result(self) -> Evaluation:
        findings, entry, status = list(self.findings), self.entry, self.status
        if entry is not None:
            for t in entry.tasks:
                if t.id not in self.completed:
                    findings.append(
                        Finding(
                            kind="milestone_missing",
                            message=f"task {t.id} never completed",
                            task_id=t.id,
                        )
                    )
        if status not in TERMINAL:
            findings.append(Finding(kind="terminal_status", message=f"the run is still {status}"))
        elif status != "completed":
            findings.append(Finding(kind="terminal_status", message=f"the run ended {status}"))
        return Evaluation(
            run_id=self.run_id,
            workflow=entry.name if entry is not None else None,
            status=status,
            findings=tuple(sorted(findings, key=lambda f: (f.seq is None, f.seq or 0))),
        )


def _call_findings(
    entry: CatalogEntry,
    intent: Mapping[str, Any],
    ctx: Mapping[str, Any] | None,
    preflight_done: set[str],
    seq: int,
    agents: frozenset[str] | None,
) -> list[Finding]:
    out: list[Finding] = []
    tool, call_id = str(intent.get("tool_id")), intent.get("call_id")
    missing = [t for t in entry.preflight_tools if t not in preflight_done]
    if missing and tool not in entry.preflight_tools:
        out.append(
            Finding(
                kind="preflight_order",
                message=f"{tool} ran before preflight {', '.join(missing)} succeeded",
                seq=seq,
                call_id=call_id,
            )
        )
    task_id = intent.get("task_id")
    if not isinstance(task_id, str):
        return out
    task = next((t for t in entry.tasks if t.id == task_id), None)
    if task is None:
        out.append(
            Finding(
                kind="tool_outside_task", message=f"no task {task_id}", seq=seq, call_id=call_id
            )
        )
        return out
    if tool not in task.required_tools:
        out.append(
            Finding(
                kind="tool_outside_task",
                message=f"task {task_id} may use {', '.join(task.required_tools)}, not {tool}",
                seq=seq,
                task_id=task_id,
                call_id=call_id,
            )
        )
    if ctx is not None:
        agent = ctx.get("agent")
        role_is_agent = agents is None or task.role in agents
        if role_is_agent and agent != task.role:
            out.append(
                Finding(
                    kind="role_mismatch",
                    message=f"task {task_id} is for {task.role}, the call came from {agent}",
                    seq=seq,
                    task_id=task_id,
                    call_id=call_id,
                )
            )
        if ctx.get("profile") != task.profile:
            out.append(
                Finding(
                    kind="profile_mismatch",
                    message=f"task {task_id} runs in {task.profile}, the call in "
                    f"{ctx.get('profile')}",
                    seq=seq,
                    task_id=task_id,
                    call_id=call_id,
                )
            )
    return out


def _artifact_findings(entry: CatalogEntry, p: Mapping[str, Any], seq: int) -> list[Finding]:
    typ = p.get("type")
    producer = p.get("producer") or {}
    task_id = producer.get("task_id")
    declared = set(entry.input_artifacts) | set(entry.output_artifacts)
    if typ not in declared:
        return [
            Finding(
                kind="artifact_type_unexpected",
                message=f"artifact type {typ} is not declared by the workflow",
                seq=seq,
                task_id=task_id,
            )
        ]
    if isinstance(task_id, str):
        task = next((t for t in entry.tasks if t.id == task_id), None)
        if task is not None and typ not in task.output_artifacts:
            return [
                Finding(
                    kind="artifact_type_unexpected",
                    message=f"task {task_id} registered {typ}, outside its outputs",
                    seq=seq,
                    task_id=task_id,
                )
            ]
    return []


async def evaluate_run(
    store: Store, run_id: str, *, agents: frozenset[str] | None = None
) -> Evaluation:
    events = await read_events(store, run_id)
    if not events:  # not a run with no findings but "the run is still None"
        raise InvalidInput("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    return evaluate_events(run_id, events, agents=agents)
