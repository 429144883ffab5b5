"""Chat orchestration overhead per turn with the scripted provider, beside the provider's own
time in the same run.

Opens the workflow-copilot example (SQLite store in a temp dir) and measures, over
``--turns`` turns each:

* tool listing: resolving the chat context (authorized tools, recorded in the ledger) plus
  building the model-facing tool specs — what a client waits for before the model is asked;
* time to first event: ``execute_chat`` called → ``conversation.started`` yielded;
* tool round trip: the invoker's ``tool.started`` → ``tool.result`` (kernel call, clamp,
  ledger record), per tool call of the story's first turn;
* provider's own time: time spent inside the scripted provider's generator, excluding the
  tool invoker it calls (the "model"; near zero for the scripted one).

Goals (issue 9): Charter's share ≤ 2.5 ms p95 for tool listing and ≤ 30 ms p95 to the first
event, excluding the model. Usage: ``python bench/chat.py [--turns 200] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from charter.project.init import init_project
from charter.proposals import ProposalService, load_proposal_settings
from charter.providers import ChatRequest, Orchestrator, ScriptedProvider
from charter.providers.base import ToolInvocation, ToolInvoker, ToolOutcome, TurnRequest
from charter.providers.events import ProviderEvent
from charter.runtime import open_runtime


class Timed:
    """Wraps a provider: accumulates the time spent in its generator minus tool calls."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.own = 0.0

    async def create_session(self, conversation_id: str) -> Any:
        return await self.inner.create_session(conversation_id)

    async def execute_turn(
        self, request: TurnRequest, invoker: ToolInvoker
    ) -> AsyncIterator[ProviderEvent]:
        outer = self
        in_tools = 0.0

        class Counting:
            async def invoke(self, invocation: ToolInvocation) -> ToolOutcome:
                nonlocal in_tools
                started = time.perf_counter()
                try:
                    return await invoker.invoke(invocation)
                finally:
                    in_tools += time.perf_counter() - started

        stream = self.inner.execute_turn(request, Counting())
        while True:
            before, tools_before = time.perf_counter(), in_tools
            try:
                event = await anext(stream)
            except StopAsyncIteration:
                outer.own += time.perf_counter() - before - (in_tools - tools_before)
                return
            outer.own += time.perf_counter() - before - (in_tools - tools_before)
            yield event


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def main(turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        init_project(root, template="workflow-copilot")
        async with open_runtime(root, store="sqlite:///.charter/charter.db") as rt:
            provider = Timed(ScriptedProvider.from_file(root / "script.yaml"))
            orch = Orchestrator(
                rt,
                provider=provider,
                proposals=ProposalService(rt, load_proposal_settings(rt.deployment.source)),
            )
            app = rt.principal("app")
            listing, specs, first, rounds, own, totals = [], [], [], [], [], []
            for i in range(turns):
                request = ChatRequest(
                    conversation_id=f"bench-{i}",
                    principal=app,
                    message="please create a workflow for onboarding" if i % 2 else "hello",
                    profile="copilot",
                    agent="copilot",
                )
                started = time.perf_counter()
                ctx = await orch.resolve(request)
                resolved = time.perf_counter()
                orch.tool_specs(ctx)
                listing.append(time.perf_counter() - started)
                specs.append(time.perf_counter() - resolved)

                provider.own = 0.0
                opened: dict[str, float] = {}
                started = time.perf_counter()
                async for event in orch.execute_chat(request):
                    now = time.perf_counter()
                    if event.type == "conversation.started":
                        first.append(now - started)
                    elif event.type == "tool.started":
                        opened[event.data["callId"]] = now
                    elif event.type == "tool.result":
                        rounds.append(now - opened.pop(event.data["callId"]))
                totals.append(time.perf_counter() - started)
                own.append(provider.own)
    return {
        "turns": turns,
        "tool_listing_ms": {"p50": pct(listing, 0.5), "p95": pct(listing, 0.95)},
        "tool_specs_only_ms": {"p50": pct(specs, 0.5), "p95": pct(specs, 0.95)},
        "first_event_ms": {"p50": pct(first, 0.5), "p95": pct(first, 0.95)},
        "tool_round_trip_ms": {"p50": pct(rounds, 0.5), "p95": pct(rounds, 0.95)},
        "provider_own_ms": {"p50": pct(own, 0.5), "p95": pct(own, 0.95)},
        "turn_ms": {"p50": pct(totals, 0.5), "p95": pct(totals, 0.95)},
        "tool_calls": len(rounds),
        "goals": {
            "tool_listing_p95_le_2_5ms": pct(listing, 0.95) <= 2.5,
            "first_event_p95_le_30ms": pct(first, 0.95) <= 30.0,
        },
        "mean_turn_ms": statistics.fmean(totals) * 1000,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.turns))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:22} {value}")
