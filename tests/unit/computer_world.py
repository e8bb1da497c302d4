"""A computer world for the unit tests of use_cases/computer: memory storage, the
test's clock (wall time and the rate budget's), a fake sandbox per provider name
(tests/fakes/sandbox.py: a folder and a real ``sh -c`` per sandbox), an agent and
a thread, and the computer's use cases over them."""

from __future__ import annotations

from typing import Any

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal, Thread
from agentsvc_core.ports import ToolCallContext
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.computer import (
    ComputerConfig,
    Computers,
    ComputerSettings,
    ComputerTools,
)
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_web.limits import TokenBuckets
from tests.fakes.sandbox import FakeSandbox
from tests.unit.turn_world import BOX, Clock

ORG = "org-computer"
ADMIN = Principal(org_id=ORG, method="api_key")


class World:
    def __init__(self, providers: tuple[str, ...] = ("local", "e2b"), per_min: int = 60) -> None:
        self.storage = MemoryStorage()
        self.clock = Clock()
        self.mono = [0.0]  # the rate budget's clock, in seconds
        self.sandboxes = {name: FakeSandbox(name) for name in providers}
        self.threads = Threads(
            self.storage.threads, self.storage.agents, self.storage.conversations, self.clock
        )
        self.settings = ComputerSettings(self.storage.secrets, self.storage.agents, BOX)
        self.buckets = TokenBuckets(per_min, clock=lambda: self.mono[0])
        self.computers = Computers(
            self.storage.computers,
            self.storage.agents,
            self.threads,
            self.settings,
            self.sandboxes,
            self.clock,
            self.buckets.spend,
        )
        self.tools = ComputerTools(self.computers)

    async def agent(self, runtime_provider: str | None = None, **config: Any) -> Agent:
        agents = Agents(self.storage.agents, self.clock, "local")
        agent = await agents.create(
            ADMIN, AgentDraft(name="computer user", runtime_provider=runtime_provider)
        )
        if config:
            await self.settings.update(ADMIN, agent.id, config)
        return agent

    async def thread(self, agent: Agent) -> Thread:
        return await self.threads.create(ADMIN, ThreadDraft(agent_id=agent.id))

    async def config(self, agent: Agent) -> ComputerConfig:
        return await self.settings.of(ORG, agent.id)

    async def call(self, agent: Agent, thread: Thread | None, name: str, **args: Any) -> str:
        ctx = ToolCallContext(tool_call_id="c1", thread_id=thread.id if thread else None)
        return await self.tools.call(ADMIN, agent, name, args, ctx)
