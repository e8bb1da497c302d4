"""The memory tools (docs/memory.md): offered only when enabled, without reading
anything for a disabled agent; save and search through the ``ToolHub``."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, cast

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal
from agentsvc_core.ports import SealedRecord, SecretStore, ToolCallContext, ToolSetup
from agentsvc_core.ports.memories import MemoryStore
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.memories.memories import Memories, MemoryConfig, MemorySettings
from agentsvc_core.use_cases.memories.tools import MemoryTools
from agentsvc_core.use_cases.plan_tools import PlanSettings, PlanTools
from agentsvc_core.use_cases.plans import Plans
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_core.use_cases.threads import Threads

ORG = "org-memories"
KEY = Principal(org_id=ORG, method="api_key")


class Unreadable:
    """A store that must not be read: it stands in for a store port (a cast where it
    is passed) and fails on the first attribute read."""

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"storage was read: {name}")


class World:
    def __init__(self) -> None:
        self.storage = MemoryStorage()
        clock = SystemClock()
        self.box = AesGcmBox(parse_keys(new_key_spec("unit")))
        self.settings = MemorySettings(self.storage.secrets, self.storage.agents, self.box)
        self.memories = Memories(
            self.storage.memories, self.storage.agents, clock, self.settings, self.storage.threads
        )
        threads = Threads(
            self.storage.threads, self.storage.agents, self.storage.conversations, clock
        )
        plans = PlanTools(
            Plans(self.storage.plans, threads, clock),
            PlanSettings(self.storage.secrets, self.storage.agents, self.box),
        )
        self.hub = ToolHub([plans, MemoryTools(self.memories, self.settings)])

    async def agent(self) -> Agent:
        agents = Agents(self.storage.agents, SystemClock(), "local")
        return await agents.create(KEY, AgentDraft(name="rememberer"))

    def setup(self, agent: Agent, **config: Any) -> ToolSetup:
        value = MemoryConfig(agent_id=agent.id, org_id=ORG, **config)
        sealed = self.settings._records.seal(ORG, "memory", str(agent.id), value)
        return ToolSetup(records={"memory": SealedRecord(value=sealed)})


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_disabled_memory_tools_offer_nothing_and_read_nothing() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        silent = MemoryTools(
            Memories(
                cast("MemoryStore", Unreadable()),
                w.storage.agents,
                SystemClock(),
                w.settings,
                w.storage.threads,
            ),
            MemorySettings(cast("SecretStore", Unreadable()), w.storage.agents, w.box),
        )
        assert silent.kinds == ("memory",)
        assert await silent.list_tools(KEY, agent, ToolSetup()) == []
        ctx = ToolCallContext(tool_call_id="c", setup=ToolSetup())
        refused = await silent.call(KEY, agent, "memory_save", {"content": "x"}, ctx)
        assert refused == "error: memory is not enabled for this agent"
        # without the turn's read, the configuration is read (and is off)
        hub = MemoryTools(w.memories, w.settings)
        assert await hub.list_tools(KEY, agent, None) == []
        assert "memory" in w.hub.kinds

    run(go())


def test_save_supersede_and_search_through_the_hub() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        setup = w.setup(agent, enabled=True)
        names = [t.name for t in await w.hub.list_tools(KEY, agent, setup)]
        assert names == ["memory_save", "memory_search"]
        thread = uuid.uuid4()
        ctx = ToolCallContext(tool_call_id="c1", thread_id=thread, user_id="alice", setup=setup)

        async def call(name: str, args: dict[str, Any]) -> Any:
            assert w.hub.owns(name)
            assert not w.hub.is_extension(name)
            text = await w.hub.call(KEY, agent, name, args, ctx)
            return text if text.startswith("error:") else json.loads(text)

        first = await call("memory_save", {"content": "Likes green tea", "key": "tea"})
        assert first["saved"] is True
        assert first["scope"] == "agent"
        again = await call("memory_save", {"content": "likes GREEN tea"})
        assert again == {"saved": False, "id": first["id"], "scope": "agent", "key": "tea"}
        second = await call("memory_save", {"content": "Likes black tea now", "key": "tea"})
        assert second["superseded"] == first["id"]
        found = await call("memory_search", {"query": "tea"})
        assert [m["id"] for m in found["memories"]] == [second["id"]]
        assert found["memories"][0]["content"] == "Likes black tea now"
        # the thread and user scopes are this call's thread and user
        mine = await call("memory_save", {"content": "Alice is vegan", "scope": "user"})
        stored = await w.storage.memories.get(ORG, agent.id, uuid.UUID(mine["id"]))
        assert (stored.scope, stored.scope_id) == ("user", "alice")
        here = await call("memory_save", {"content": "We talk about vegan food", "scope": "thread"})
        stored = await w.storage.memories.get(ORG, agent.id, uuid.UUID(here["id"]))
        assert (stored.scope, stored.scope_id) == ("thread", str(thread))
        both = await call("memory_search", {"query": "vegan", "topK": 5})
        assert {m["id"] for m in both["memories"]} == {mine["id"], here["id"]}
        only = await call("memory_search", {"query": "vegan", "scope": "user"})
        assert [m["id"] for m in only["memories"]] == [mine["id"]]
        # another user and another thread do not see them
        bob = ToolCallContext(tool_call_id="c2", thread_id=uuid.uuid4(), user_id="bob", setup=setup)
        theirs = json.loads(await w.hub.call(KEY, agent, "memory_search", {"query": "vegan"}, bob))
        assert theirs == {"memories": []}
        # no user: the user scope is refused
        nobody = ToolCallContext(tool_call_id="c3", thread_id=thread, setup=setup)
        refused = await w.hub.call(
            KEY, agent, "memory_save", {"content": "x", "scope": "user"}, nobody
        )
        assert refused == "error: the user scope needs a user: this message has none"
        assert (await call("memory_save", {"key": "x"})).startswith("error: invalid arguments")
        assert (await call("memory_search", {"query": "x", "topK": 0})).startswith("error: topK")

    run(go())


def test_scopes_and_cap_of_the_configuration() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        setup = w.setup(agent, enabled=True, scopes=("user",), max_memories=1)
        ctx = ToolCallContext(tool_call_id="c", user_id="alice", setup=setup)
        specs = await w.hub.list_tools(KEY, agent, setup)
        assert specs[0].parameters["properties"]["scope"]["enum"] == ["user"]
        saved = json.loads(await w.hub.call(KEY, agent, "memory_save", {"content": "a"}, ctx))
        assert saved["scope"] == "user"  # the default when the agent scope is not allowed
        refused = await w.hub.call(
            KEY, agent, "memory_save", {"content": "b", "scope": "agent"}, ctx
        )
        assert refused == "error: the agent scope is not enabled for this agent"
        full = await w.hub.call(KEY, agent, "memory_save", {"content": "b"}, ctx)
        assert full.startswith("error: memory: the agent keeps at most 1 active memories")

    run(go())
