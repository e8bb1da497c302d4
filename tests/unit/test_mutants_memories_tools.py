"""``memory_save`` and ``memory_search`` as the model sees them
(use_cases/memories/tools.py, docs/memory.md): their specs under a configuration,
the default scope, the thread and user scopes of a call, the refusals and the
compact answers, over the memory storage (the configuration stored, read by the
tools outside a turn)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from agentsvc_core.ports import ToolCallContext, ToolSpec
from agentsvc_core.use_cases.memories.memories import MemoryConfig
from agentsvc_core.use_cases.memories.tools import TOOL_NAMES, MemoryTools, memory_save_spec
from tests.unit.test_mutants_memories import KEY, ORG, Mind, mind

THREAD = uuid.uuid4()
HERE = ToolCallContext(tool_call_id="c1", thread_id=THREAD, user_id="alice")


class Tools:
    """The memory tools of one agent, configured as a test says."""

    def __init__(self, m: Mind) -> None:
        self.m = m
        self.tools = MemoryTools(m.memories, m.settings)

    async def configure(self, **changes: Any) -> None:
        await self.m.settings.update(KEY, self.m.agent.id, {"enabled": True, **changes})

    async def specs(self) -> dict[str, ToolSpec]:
        return {s.name: s for s in await self.tools.list_tools(KEY, self.m.agent)}

    async def call(self, name: str, ctx: ToolCallContext = HERE, **arguments: Any) -> Any:
        text = await self.tools.call(KEY, self.m.agent, name, arguments, ctx)
        return text if text.startswith("error:") else json.loads(text)

    async def where(self, memory_id: str) -> tuple[str, str | None]:
        stored = await self.m.storage.memories.get(ORG, self.m.agent.id, uuid.UUID(memory_id))
        return (stored.scope, stored.scope_id)


async def tools(**changes: Any) -> Tools:
    t = Tools(await mind())
    await t.configure(**changes)
    return t


def _scope_enum(spec: ToolSpec) -> list[str]:
    scope = spec.parameters["properties"]["scope"]
    assert scope["type"] == "string"
    description = scope["description"]
    assert "agent: every conversation of this agent" in description
    assert "thread: this conversation only" in description
    assert "user: the user you are talking to" in description
    return list(scope["enum"])


async def test_the_two_tools_and_their_arguments_as_the_model_sees_them() -> None:
    t = await tools(scopes=["thread", "user"])
    specs = await t.specs()
    assert list(specs) == list(TOOL_NAMES) == ["memory_save", "memory_search"]
    assert t.tools.owns("memory_save")
    assert t.tools.owns("memory_search")
    save, search = specs["memory_save"], specs["memory_search"]
    assert save.description.startswith("Remember a short fact for later conversations.")
    assert "Give a key (a short subject such as 'tea') to replace" in save.description
    assert save.description.endswith("instead of adding a second one. Default scope: thread.")
    assert save.parameters["type"] == "object"
    assert save.parameters["required"] == ["content"]
    properties = save.parameters["properties"]
    assert properties["content"] == {"type": "string", "maxLength": 2000}
    assert properties["key"] == {"type": "string", "maxLength": 100}
    assert _scope_enum(save) == ["thread", "user"]
    assert search.description == (
        "Search the facts remembered (by words), best first. Default: every scope you may use."
    )
    assert search.parameters["type"] == "object"
    assert search.parameters["required"] == ["query"]
    found = search.parameters["properties"]
    assert found["query"] == {"type": "string", "maxLength": 1000}
    assert found["topK"] == {"type": "integer", "minimum": 1, "maximum": 50}
    assert _scope_enum(search) == ["thread", "user"]


async def test_the_default_scope_is_the_agents_when_allowed_else_the_first() -> None:
    with_agent = await tools(scopes=["user", "agent"])
    save = (await with_agent.specs())["memory_save"]
    assert save.description.endswith(" Default scope: agent.")
    saved = await with_agent.call("memory_save", content="Open on Sundays")
    assert await with_agent.where(saved["id"]) == ("agent", None)
    without = await tools(scopes=["user", "thread"])
    saved = await without.call("memory_save", content="Alice likes tea")
    assert saved["scope"] == "user"
    assert await without.where(saved["id"]) == ("user", "alice")


def test_the_save_spec_without_a_scope_for_collection() -> None:
    config = MemoryConfig(agent_id=uuid.uuid4(), org_id=ORG)
    unscoped = memory_save_spec(config, "user", scoped=False)
    assert unscoped.name == "memory_save"
    assert set(unscoped.parameters["properties"]) == {"content", "key"}
    assert unscoped.description.endswith("instead of adding a second one.")
    assert "Default scope" not in unscoped.description
    scoped = memory_save_spec(config, "user")
    assert set(scoped.parameters["properties"]) == {"content", "key", "scope"}
    assert scoped.description.endswith(" Default scope: user.")


async def test_a_save_answers_what_it_did_compactly() -> None:
    t = await tools()
    first = await t.call("memory_save", content="Likes green tea", key="Tea")
    assert set(first) == {"saved", "id", "scope", "key"}
    assert (first["saved"], first["scope"], first["key"]) == (True, "agent", "tea")
    again = await t.call("memory_save", content="LIKES green   tea")
    assert again == {"saved": False, "id": first["id"], "scope": "agent", "key": "tea"}
    newer = await t.call("memory_save", content="Likes black tea", key="tea")
    assert newer == {
        "saved": True,
        "id": newer["id"],
        "scope": "agent",
        "key": "tea",
        "superseded": first["id"],
    }
    text = await t.tools.call(KEY, t.m.agent, "memory_save", {"content": "Compact answers"}, HERE)
    assert ", " not in text
    assert ": " not in text
    assert json.loads(text)["key"] is None


async def test_the_thread_and_user_scopes_are_the_calls_thread_and_user() -> None:
    t = await tools()
    mine = await t.call("memory_save", content="Alice is vegan", scope="user")
    assert await t.where(mine["id"]) == ("user", "alice")
    here = await t.call("memory_save", content="About vegan food", scope="thread")
    assert await t.where(here["id"]) == ("thread", str(THREAD))
    everywhere = await t.call("memory_save", content="Vegan menu", scope="agent")
    assert await t.where(everywhere["id"]) == ("agent", None)


async def test_a_scope_the_call_cannot_use_is_refused_with_its_reason() -> None:
    t = await tools(scopes=["agent", "thread"])
    refused = await t.call("memory_save", content="x", scope="user")
    assert refused == "error: the user scope is not enabled for this agent"
    refused = await t.call("memory_search", query="x", scope="user")
    assert refused == "error: the user scope is not enabled for this agent"
    outside = ToolCallContext(tool_call_id="c2", user_id="alice")
    refused = await t.call("memory_save", outside, content="x", scope="thread")
    assert refused == "error: the thread scope works inside a conversation only"
    refused = await t.call("memory_search", outside, query="x", scope="thread")
    assert refused == "error: the thread scope works inside a conversation only"
    u = await tools()
    nobody = ToolCallContext(tool_call_id="c3", thread_id=THREAD)
    refused = await u.call("memory_save", nobody, content="x", scope="user")
    assert refused == "error: the user scope needs a user: this message has none"


async def test_a_save_past_the_cap_and_bad_arguments_are_error_texts() -> None:
    t = await tools(max_memories=1)
    await t.call("memory_save", content="one")
    full = await t.call("memory_save", content="two")
    assert full == ("error: memory: the agent keeps at most 1 active memories (maxMemories)")
    bad = await t.call("memory_save", key="no content")
    assert bad.startswith("error: invalid arguments")
    bad = await t.call("memory_search", content="no query")
    assert bad.startswith("error: invalid arguments")


async def _everywhere(t: Tools, other_thread: uuid.UUID) -> dict[str, str]:
    """A fact about tea in each place, as the tools save them."""
    bob = ToolCallContext(tool_call_id="b", thread_id=other_thread, user_id="bob")
    ids: dict[str, str] = {}
    for name, ctx, scope in [
        ("agent", HERE, "agent"),
        ("thread", HERE, "thread"),
        ("alice", HERE, "user"),
        ("bob", bob, "user"),
        ("other thread", bob, "thread"),
    ]:
        ids[name] = (await t.call("memory_save", ctx, content=f"{name} tea", scope=scope))["id"]
    return ids


async def test_a_search_without_scope_reads_every_allowed_scope_the_call_has() -> None:
    t = await tools()
    other = uuid.uuid4()
    ids = await _everywhere(t, other)

    async def found(ctx: ToolCallContext, **args: Any) -> set[str]:
        answer = await t.call("memory_search", ctx, query="tea", topK=10, **args)
        return {m["id"] for m in answer["memories"]}

    assert await found(HERE) == {ids["agent"], ids["thread"], ids["alice"]}
    no_user = ToolCallContext(tool_call_id="c", thread_id=THREAD)
    assert await found(no_user) == {ids["agent"], ids["thread"]}
    no_thread = ToolCallContext(tool_call_id="c", user_id="alice")
    assert await found(no_thread) == {ids["agent"], ids["alice"]}
    assert await found(HERE, scope="thread") == {ids["thread"]}
    assert await found(HERE, scope="user") == {ids["alice"]}
    assert await found(HERE, scope="agent") == {ids["agent"]}
    await t.configure(scopes=["user", "thread"])
    assert await found(HERE) == {ids["thread"], ids["alice"]}


async def test_a_search_answers_five_by_default_with_scores_of_four_places() -> None:
    t = await tools()
    for i in range(6):
        t.m.clock.advance(1)  # ties of score: newest first
        await t.call("memory_save", content=f"tea number {i}", key=f"k{i}")
    answer = await t.call("memory_search", query="tea cake scones")
    memories = answer["memories"]
    assert len(memories) == 5
    assert memories[0] == {
        "id": memories[0]["id"],
        "content": "tea number 5",
        "key": "k5",
        "scope": "agent",
        "score": 0.3333,
    }
    one = await t.call("memory_search", query="number", topK=1)
    assert [m["content"] for m in one["memories"]] == ["tea number 5"]
