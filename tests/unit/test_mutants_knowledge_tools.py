"""``knowledge_search`` as the model sees it (use_cases/knowledge/tools.py): offered
only where there are ready documents, with its cache of who has them, and its
answer, over the memory storage (tests/unit/knowledge_world.py). The cache's
clock is the module's ``time.monotonic``, which these tests replace for the tool
alone (the event loop keeps its own)."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import msgspec
import pytest

from agentsvc_adapters.documents import FileParser
from agentsvc_core.entities import Agent
from agentsvc_core.ports import ToolCallContext, ToolSetup
from agentsvc_core.use_cases.knowledge import tools as knowledge_tools
from agentsvc_core.use_cases.knowledge.documents import Knowledge
from agentsvc_core.use_cases.knowledge.tools import TOOL_NAME, KnowledgeTools
from tests.unit.knowledge_world import KEY, OUTSIDER, Library, library


class Ticks:
    """``time`` for the tool: ``monotonic()`` answers ``at``, which the test moves."""

    def __init__(self) -> None:
        self.at = 1000.0

    def monotonic(self) -> float:
        return self.at


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> Ticks:
    clock = Ticks()
    monkeypatch.setattr(knowledge_tools, "time", SimpleNamespace(monotonic=clock.monotonic))
    return clock


async def _agent(lib: Library) -> Agent:
    return await lib.storage.agents.get("acme", lib.agent)


async def _offered(tools: KnowledgeTools, agent: Agent, thread: uuid.UUID | None = None) -> bool:
    setup = None if thread is None else ToolSetup(thread_id=thread)
    names = [t.name for t in await tools.list_tools(KEY, agent, setup)]
    assert names in ([], [TOOL_NAME])
    return names == [TOOL_NAME]


async def test_the_tool_owns_its_one_name() -> None:
    tools = KnowledgeTools((await library()).knowledge)
    assert tools.owns("knowledge_search")
    assert not tools.owns("knowledge_searc")
    assert not tools.owns("memory_search")
    assert not tools.is_extension("knowledge_search")


async def test_offered_for_ready_documents_of_the_organization_the_agent_or_the_thread(
    ticks: Ticks,
) -> None:
    lib = await library()
    tools = KnowledgeTools(lib.knowledge)
    agent = await _agent(lib)
    assert not await _offered(tools, agent)  # nothing is ready
    # only Alice's thread document is ready: offered in her thread alone
    await lib.knowledge.index(lib.job(lib.alices))
    assert await _offered(tools, agent, lib.alice_thread)
    assert not await _offered(tools, agent, lib.bob_thread)
    assert not await _offered(tools, agent)
    # the agent's: everywhere this agent talks
    await lib.knowledge.index(lib.job(lib.of_agent))
    assert await _offered(tools, agent)
    assert await _offered(tools, agent, lib.bob_thread)


async def test_an_organization_document_offers_it_to_every_agent(ticks: Ticks) -> None:
    lib = await library()
    tools = KnowledgeTools(lib.knowledge)
    agent = await _agent(lib)
    await lib.knowledge.index(lib.job(lib.org))
    assert await _offered(tools, msgspec.structs.replace(agent, id=uuid.uuid4()))


async def test_who_has_documents_is_remembered_for_ten_seconds(ticks: Ticks) -> None:
    lib = await library()
    agent = await _agent(lib)
    tools = KnowledgeTools(lib.knowledge)
    assert not await _offered(tools, agent)
    # another process indexes the organization's document: this one's count of
    # changes does not move, so the answer stays until it is ten seconds old
    elsewhere = Knowledge(
        lib.storage.knowledge,
        lib.storage.agents,
        lib.threads,
        lib.jobs,
        FileParser(),
        lib.clock,
    )
    await elsewhere.index(lib.job(lib.org))
    ticks.at += 10
    assert not await _offered(tools, agent)
    ticks.at += 0.5
    assert await _offered(tools, agent)


async def test_a_change_in_this_process_is_seen_at_once(ticks: Ticks) -> None:
    lib = await library()
    agent = await _agent(lib)
    tools = KnowledgeTools(lib.knowledge)
    assert not await _offered(tools, agent)
    await lib.knowledge.index(lib.job(lib.org))
    assert await _offered(tools, agent)
    await lib.knowledge.delete(KEY, lib.org.id)
    assert not await _offered(tools, agent)


async def test_the_first_change_in_this_process_is_seen_at_once(ticks: Ticks) -> None:
    lib = await library()
    agent = await _agent(lib)
    # a process that has changed nothing yet (the uploads were another's)
    here = Knowledge(
        lib.storage.knowledge, lib.storage.agents, lib.threads, lib.jobs, FileParser(), lib.clock
    )
    tools = KnowledgeTools(here)
    assert not await _offered(tools, agent)
    await here.index(lib.job(lib.org))
    assert here.changes == {"acme": 1}
    assert await _offered(tools, agent)


async def test_the_cache_is_per_organization(ticks: Ticks) -> None:
    lib = await library()
    agent = await _agent(lib)
    tools = KnowledgeTools(lib.knowledge, cache_s=60)
    await lib.knowledge.index(lib.job(lib.org))
    assert await _offered(tools, agent)
    elsewhere = msgspec.structs.replace(agent, org_id=OUTSIDER.org_id)
    assert await tools.list_tools(OUTSIDER, elsewhere) == []


async def test_a_search_answers_the_passages_with_their_documents() -> None:
    lib = await library()
    await lib.index_queued()
    tools = KnowledgeTools(lib.knowledge)
    agent = await _agent(lib)
    ctx = ToolCallContext(tool_call_id="c1", thread_id=lib.alice_thread)
    answer = json.loads(await tools.call(KEY, agent, TOOL_NAME, {"query": "zebra"}, ctx))
    by_title = {r["title"]: r for r in answer["results"]}
    # the organization's, the agent's and this thread's, not another thread's
    assert set(by_title) == {"org.txt", "agent.txt", "alice.txt"}
    first = by_title["alice.txt"]
    assert first["document_id"] == str(lib.alices.id)
    assert first["text"] == "alice.txt zebra"
    assert (first["headings"], first["page"]) == ([], None)
    assert uuid.UUID(first["chunk_id"])
    assert sorted(r["score"] for r in answer["results"]) == [0.015873, 0.016129, 0.016393]
    one = json.loads(await tools.call(KEY, agent, TOOL_NAME, {"query": "zebra", "topK": 1}, ctx))
    assert len(one["results"]) == 1


async def test_a_bad_call_is_an_error_the_model_reads() -> None:
    lib = await library()
    tools = KnowledgeTools(lib.knowledge)
    agent = await _agent(lib)
    ctx = ToolCallContext(tool_call_id="c1")
    assert await tools.call(KEY, agent, "knowledge_find", {"query": "x"}, ctx) == (
        "error: no knowledge tool named 'knowledge_find'"
    )
    assert (await tools.call(KEY, agent, TOOL_NAME, {}, ctx)).startswith(
        "error: invalid arguments: Object missing required field `query`"
    )
    assert await tools.call(KEY, agent, TOOL_NAME, {"query": "x", "topK": 21}, ctx) == (
        "error: topK: must be between 1 and 20"
    )
    assert await tools.call(KEY, agent, TOOL_NAME, {"query": " "}, ctx) == (
        "error: query: must not be empty"
    )
