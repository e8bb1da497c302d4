"""A runner's world for the fast unit tests of the runner engine
(use_cases/runners/engine.py): the turn's world (tests/unit/turn_world.py: the memory
storage, a scripted model whose calls report the usage a test chooses, the clock
the test moves), the runner use cases over it, a webhook caller that records its
calls, and the engine's job run in the test's own task (no worker, no sleeps)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import msgspec

from agentsvc_core.entities import Usage
from agentsvc_core.entities.runner import Runner, RunnerRun
from agentsvc_core.ports.mcp import McpCallResult, McpClient, McpEndpoint, McpTool
from agentsvc_core.ports.webhooks import WebhookAnswer, WebhookCall, WebhookCaller
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.runners.agent_steps import AgentSteps
from agentsvc_core.use_cases.runners.budgets import Budgets
from agentsvc_core.use_cases.runners.definitions import BudgetChanges, RunnerDraft, Runners
from agentsvc_core.use_cases.runners.engine import RunnerEngine
from agentsvc_core.use_cases.runners.runs import RunnerRuns, job_payload
from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_core.use_cases.runners.trace import RunTraces
from agentsvc_core.use_cases.runners.work import StepWork, WebhookSteps
from agentsvc_core.use_cases.threads import Threads
from tests.unit.published import Published
from tests.unit.turn_world import BOX, WHO, Script, Tools, World, says, world

# every token costs a cent: a step's cost is its tokens / 100
CENT_A_TOKEN = PriceTable([("*", Price(input=10_000.0, output=10_000.0))], taken="2026-11-01")


def spends(tokens: int) -> list[Any]:
    """A model call that answers and reports ``tokens``."""
    return says("done", usage=Usage(input_tokens=tokens - tokens // 2, output_tokens=tokens // 2))


class Jobs:
    """The job queue: records what was queued (the test runs the engine itself)."""

    def __init__(self) -> None:
        self.queued: list[tuple[str, bytes, str | None]] = []
        self.delays: list[float] = []

    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        self.queued.append((kind, payload, key))
        self.delays.append(delay_s)
        return True


class Caller(WebhookCaller):
    """The customer's endpoint: answers 200 ``{}`` and records each call."""

    def __init__(self) -> None:
        self.calls: list[WebhookCall] = []

    async def call(self, call: WebhookCall) -> WebhookAnswer:
        self.calls.append(call)
        return WebhookAnswer(outcome="ok", status_code=200, body="{}")


class Signing:
    async def signing_secrets(self, org: str) -> list[str]:
        return ["whsec-test"]


class NoMcp(McpClient):
    """No runner here has an MCP server: nothing is ever asked of the client."""

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        raise AssertionError("no MCP server is attached")

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        raise AssertionError("no MCP server is attached")

    async def aclose(self) -> None:
        return None


class AnyUrl:
    def refusal(self, url: str) -> str | None:
        return None


@dataclass
class RunnerWorld:
    turn: World
    runners: Runners
    runs: RunnerRuns
    engine: RunnerEngine
    caller: Caller
    jobs: Jobs = field(default_factory=Jobs)
    events: Published = field(default_factory=Published)

    async def runner(self, *kinds: str, **budget: Any) -> Runner:
        """A runner of one step per kind (an agent step, a condition that goes on,
        a webhook step), its budget set to ``budget`` (``BudgetChanges`` fields)."""
        steps = [self._step(i, kind) for i, kind in enumerate(kinds)]
        runner = await self.runners.create(WHO, RunnerDraft(name="budgeted", steps=steps))
        if budget:
            runner = await self.runners.set_budget(WHO, runner.id, BudgetChanges(**budget))
        return runner

    def _step(self, i: int, kind: str) -> StepDraft:
        sid = f"s{i}-{kind}"
        if kind == "agent":
            return StepDraft(id=sid, kind="agent", agent_id=self.turn.agent.id, prompt="go")
        if kind == "condition":
            return StepDraft(id=sid, kind="condition", expression="`true`", if_true="next")
        return StepDraft(id=sid, kind="webhook", url="https://hooks.example.com/step")

    async def run(self, runner: Runner) -> RunnerRun:
        """Start a run of the runner and run its job to where it stops."""
        run, _ = await self.runs.start(WHO, runner.id, {})
        return await self.execute(run)

    async def execute(self, run: RunnerRun) -> RunnerRun:
        await self.engine.execute(job_payload(run.org_id, run.id))
        return await self.turn.storage.runners.get_run(run.org_id, run.id)

    async def resume(self, run: RunnerRun, **raised: Any) -> RunnerRun:
        assert run.runner_id is not None
        await self.runs.resume(WHO, run.runner_id, run.id, **raised)
        return await self.execute(run)

    async def earlier_run(self, runner: Runner, tokens: int, cost_usd: float, **over: Any) -> None:
        """A run of the runner that ended having spent ``tokens`` and ``cost_usd``
        (created now unless ``created_at`` says otherwise)."""
        now = self.turn.clock.now()
        run = RunnerRun(
            id=uuid.uuid4(),
            org_id=runner.org_id,
            runner_id=runner.id,
            agent_id=None,
            trigger_id=None,
            trigger_kind="api",
            pipeline=(),
            steps=(),
            status="succeeded",
            input={},
            tokens=tokens,
            cost_usd=cost_usd,
            created_at=now,
            updated_at=now,
            ended_at=now,
        )
        await self.turn.storage.runners.add_run(msgspec.structs.replace(run, **over))


async def runner_world(
    *calls: list[Any], tools: Tools | None = None, cron_min_interval_s: float = 60.0
) -> RunnerWorld:
    """``calls``: what the model's calls play, in order (the last one again and
    again; ``spends(n)``: an answer that uses ``n`` tokens)."""
    w = await world(Script(*calls) if calls else Script(spends(11)), tools)
    s, clock = w.storage, w.clock
    runners = Runners(
        s.runners,
        s.agents,
        BOX,
        AnyUrl(),
        clock,
        cron_min_interval_s=cron_min_interval_s,
        skills=s.skills,
    )
    jobs = Jobs()
    traces = RunTraces(s.runners, s.traces, clock, timedelta(days=7))
    runs = RunnerRuns(s.runners, runners, jobs, clock, w.conversation, traces)
    caller = Caller()
    agent_steps = AgentSteps(
        s.runners,
        w.conversation,
        Threads(s.threads, s.agents, s.conversations, clock),
        s.conversations,
        s.agents,
        McpServers(s.mcps, s.agents, NoMcp(), BOX, AnyUrl(), clock, allow_stdio=False),
        CENT_A_TOKEN,
    )
    events = Published()
    engine = RunnerEngine(
        s.runners,
        clock,
        StepWork(agent_steps, WebhookSteps(caller, Signing(), BOX)),
        Budgets(s.runners, clock, CENT_A_TOKEN),
        traces,
        events=events,
    )
    return RunnerWorld(w, runners, runs, engine, caller, jobs, events)
