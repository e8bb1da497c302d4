"""A turn's world for the unit tests of the turn (use_cases/turn/conversation.py, reply.py,
heartbeats.py): the memory storage, a scripted in-process model, scripted server
tools and a clock the test moves. No network, no sleeps: fast enough to run per
mutant (``make mutation``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.llm import Families, LocalModel, PrefixRouter
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.memory.conversations import MemoryConversations
from agentsvc_adapters.signals import LocalStopBus
from agentsvc_core.entities import Agent, Message, Principal, Run, Thread, ToolCall, Usage
from agentsvc_core.ports import (
    ChatModel,
    Finished,
    ModelEvent,
    ModelRequest,
    ServerTools,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.ports.resolver import CredentialResolver
from agentsvc_core.ports.telemetry import Tracer
from agentsvc_core.use_cases.org_settings import (
    AgentConfigs,
    KeyBroker,
    OrgSettings,
    ResolverConfig,
)
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn.compaction import Compactor
from agentsvc_core.use_cases.turn.conversation import Conversation
from agentsvc_core.use_cases.turn.events import EventData, EventSource
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread

ORG = "org-turn"
WHO = Principal(org_id=ORG, method="api_key")
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
BOX = AesGcmBox([("k1", b"\x09" * 32)])


class Clock:
    """A clock that moves only when the test says so."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


HANG = "hang"  # a step item: the call waits here until it is cancelled


class Script(ChatModel):
    """A model that plays one scripted step per call: a list of model events, an
    exception to raise, or ``HANG`` (wait until cancelled, ``waiting`` is set). The
    last step is played again when the script runs out. Records every request and
    whether each stream was closed early."""

    def __init__(self, *steps: list[Any], provider: str = "local") -> None:
        self.steps = list(steps) or [[TextDelta("ok")]]
        self.provider = provider
        self.requests: list[ModelRequest] = []
        self.closed = 0  # streams closed before their end
        self.waiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        step = self.steps[min(len(self.requests), len(self.steps) - 1)]
        self.requests.append(request)
        try:
            for item in step:
                if item is HANG:
                    self.waiting.set()
                    await asyncio.Event().wait()
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        except GeneratorExit:
            self.closed += 1
            raise
        except asyncio.CancelledError:
            self.closed += 1
            raise


def says(*words: str, usage: Usage | None = None) -> list[Any]:
    """A step that says ``words`` then reports ``usage``."""
    return [*(TextDelta(w) for w in words), UsageReport(usage or Usage()), Finished("stop")]


def calls(*names: str, text: str = "", usage: Usage | None = None) -> list[Any]:
    """A step that asks for the tools ``names`` (ids ``c-<name>``)."""
    step: list[Any] = [TextDelta(text)] if text else []
    step += [ToolCallRequested(ToolCall(id=f"c-{n}", name=n, arguments={"q": n})) for n in names]
    return [*step, UsageReport(usage or Usage()), Finished("tool_calls")]


class Tools(ServerTools):
    """Offers ``specs``; a call answers from ``answers`` (a string, an exception to
    raise, or a coroutine function of the arguments). Records every call."""

    def __init__(self, *names: str) -> None:
        self.specs = [ToolSpec(name=n, description=f"the {n} tool") for n in names]
        self.answers: dict[str, Any] = {}
        self.called: list[tuple[str, dict[str, Any]]] = []
        self.callers: list[tuple[Principal, Agent]] = []
        self.listed_for: list[tuple[Principal, Agent, object]] = []

    def owns(self, name: str) -> bool:
        return True  # the turn's one source: every name is its own

    def is_extension(self, name: str) -> bool:
        return True  # its tools are traced as MCP tools

    async def list_tools(
        self, who: Principal, agent: Agent, setup: object = None
    ) -> list[ToolSpec]:
        self.listed_for.append((who, agent, setup))
        return list(self.specs)

    async def call(
        self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any = None
    ) -> str:
        self.called.append((name, arguments))
        self.callers.append((who, agent))
        answer = self.answers.get(name, f"{name} answered")
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return str(await answer(arguments))
        return str(answer)


@dataclass
class World:
    conversation: Conversation
    storage: MemoryStorage
    model: Script
    tools: Tools
    stops: LocalStopBus
    clock: Clock
    agent: Agent
    thread: Thread
    finished: list[Run] = field(default_factory=list)

    @property
    def store(self) -> MemoryConversations:
        """The storage's conversation store, as the memory class it is (``runs_of``,
        ``messages``: what a test reads and writes directly)."""
        store = self.storage.conversations
        assert isinstance(store, MemoryConversations)
        return store

    async def runs(self) -> list[Run]:
        return list(self.store.runs_of(ORG, self.thread.id))

    async def messages(self) -> list[Message]:
        return self.store.messages(ORG, self.thread.id)[0]

    async def usage(self) -> list[Any]:
        return await self.storage.conversations.usage(ORG, self.thread.id)


async def world(
    model: Script | None = None,
    tools: Tools | None = None,
    *,
    agent: dict[str, Any] | None = None,
    thread: dict[str, Any] | None = None,
    stale_after_s: float = 45.0,
    store: Callable[[Any], Any] | None = None,
    compactor: Callable[[Any, Any], Any] | None = None,
    stored: bool = False,
    tools_of: Callable[[MemoryStorage], Any] | None = None,
    **conversation: Any,
) -> World:
    """A conversation over the memory storage, with one agent and one thread;
    ``store`` wraps the conversation store the use case writes to; ``compactor``
    (a ``Compactor`` class) gives it the agents' configurations and summary
    compaction over the storage's secrets; ``stored``: the storage's stored events
    (re-attach) and idempotency keys; ``tools_of``: the turn's tools, built over the
    world's storage (``tools`` is then None)."""
    storage = MemoryStorage()
    model = model or Script()
    tools = tools_of(storage) if tools_of else (tools or Tools())
    clock = Clock()
    the_agent = agent_in(ORG, **(agent or {"default_model": "local"}))
    await storage.agents.add(the_agent)
    the_thread = await storage.threads.add(a_thread(ORG, the_agent.id, **(thread or {})))
    stops = LocalStopBus()
    families = (
        Families(local=model)
        if model.provider == "local"
        else Families(
            local=Script(),
            alpha=model if model.provider == "alpha" else None,
            beta=model if model.provider == "beta" else None,
        )
    )
    router = PrefixRouter(families)
    compaction: dict[str, Any] = (
        {
            "configs": AgentConfigs(storage.secrets, BOX),
            "compactor": compactor(storage.secrets, BOX),
        }
        if compactor
        else {}
    )
    kept: dict[str, Any] = (
        {"streams": storage.streams, "idempotency": storage.idempotency} if stored else {}
    )
    conv = Conversation(
        Threads(storage.threads, storage.agents, storage.conversations, clock),
        storage.turn_reader,
        store(storage.conversations) if store else storage.conversations,
        router,
        tools,
        stops,
        clock,
        stale_after_s=stale_after_s,
        **compaction,
        **kept,
        **conversation,
    )
    return World(conv, storage, model, tools, stops, clock, the_agent, the_thread)


async def read_all(turn: EventSource) -> list[EventData]:
    """Every event of the turn, to its end."""
    events: list[EventData] = []
    while True:
        got = await turn.read(len(events), 5.0)
        assert got is not None, "the turn went quiet"
        if not got:
            return events
        events.extend(got)


def a_stored_run(w: World, **over: Any) -> Run:
    run = Run(
        id=uuid.uuid4(),
        org_id=ORG,
        thread_id=w.thread.id,
        status="running",
        started_at=w.clock.now(),
        heartbeat_at=w.clock.now(),
    )
    return msgspec.structs.replace(run, **over)


async def store_run(w: World, run: Run, new: list[Message] | None = None) -> None:
    """Store ``run`` as if another process had begun it."""
    w.store.runs_of(ORG, w.thread.id).append(run)
    if new:
        w.store._messages.setdefault((ORG, w.thread.id), []).extend(new)


def run_ids(events: list[EventData]) -> list[UUID]:
    return [e.run_id for e in events if hasattr(e, "run_id")]


class NoRefusals:
    """The settings' URL check, refusing no URL (the resolver is a fake)."""

    def refusal(self, url: str) -> str | None:
        return None


@dataclass
class ResolverWorld:
    conversation: Conversation
    storage: MemoryStorage
    agent: Agent
    thread: Thread


async def resolver_world(
    who: Principal,
    model: ChatModel,
    tools: ServerTools,
    resolver: CredentialResolver,
    *,
    tracer: Tracer | None = None,
    model_id: str = "beta:m1",
) -> ResolverWorld:
    """A conversation over the memory storage with one thread of one agent (its
    default model ``model_id``) whose credential resolver is on: the ``beta``
    family is ``model``, and each key comes from ``resolver``. The real clock,
    agent configurations and compactor (sealed with ``BOX``); ``tracer`` for the
    keys' and the turn's spans."""
    org = who.org_id
    storage = MemoryStorage()
    clock = SystemClock()
    agent = agent_in(org, default_model=model_id)
    await storage.agents.add(agent)
    thread = await storage.threads.add(a_thread(org, agent.id))
    config = ResolverConfig(
        agent_id=agent.id, org_id=org, enabled=True, resolver_url="https://r.example/"
    )
    await SealedRecords(storage.secrets, BOX).put(org, "resolver", str(agent.id), config)
    settings = OrgSettings(
        storage.secrets, storage.agents, BOX, NoRefusals(), clock, allow_http=False
    )
    conversation = Conversation(
        Threads(storage.threads, storage.agents, storage.conversations, clock),
        storage.turn_reader,
        storage.conversations,
        PrefixRouter(Families(local=LocalModel(), beta=model)),
        tools,
        LocalStopBus(),
        clock,
        keys=KeyBroker(settings, resolver, tracer),
        configs=AgentConfigs(storage.secrets, BOX),
        compactor=Compactor(storage.secrets, BOX),
        tracer=tracer,
    )
    return ResolverWorld(conversation, storage, agent, thread)
