"""The tool hub (use_cases/server_tools.py): the tool sources the service builds
never claim the same name (ports/tools.py's naming rule), so the hub routes every
call to the one source that offered it; a source claims only the names it says it
owns; the sources are listed concurrently, their tools kept in the sources' order."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import Unavailable
from agentsvc_core.ports import ServerTools, ToolCallContext, ToolSetup, ToolSpec
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_web.bootstrap import build_services
from agentsvc_web.settings import Settings
from tests.contract.test_agents_contract import agent_in

SOURCES = build_services(
    Settings(storage="memory", bootstrap_api_key=None, bootstrap_org=f"hub-{uuid.uuid4().hex[:6]}")
).conversation._tools._sources  # type: ignore[attr-defined]

NAMES = [
    "docs-search__lookup",  # MCP
    "db_warehouse__query",  # database integration
    "knowledge_search",
    "lookup_order",  # webhook tool
    "memory_search",
    "plan_create",
    "todo_update",
    "web_fetch",
    "web_search",
]


def owners(name: str) -> list[str]:
    return [type(s).__name__ for s in SOURCES if s.owns(name)]


def test_each_kind_of_name_has_its_one_source() -> None:
    assert {n: owners(n) for n in NAMES} == {
        "docs-search__lookup": ["McpTools"],
        "db_warehouse__query": ["IntegrationTools"],
        "knowledge_search": ["KnowledgeTools"],
        "lookup_order": ["WebhookToolSource"],
        "memory_search": ["MemoryTools"],
        "plan_create": ["PlanTools"],
        "todo_update": ["PlanTools"],
        "web_fetch": ["WebTools"],
        "web_search": ["WebTools"],
    }


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789ABC", min_size=1, max_size=40))
def test_no_name_has_two_owners(name: str) -> None:
    assert len(owners(name)) <= 1, (name, owners(name))


# --- the hub over sources of its own -------------------------------------------

WHO = Principal(org_id="hub-org", method="api_key")
AGENT = agent_in("hub-org")
CTX = ToolCallContext(tool_call_id="call-1")


class Named(ServerTools):
    """Owns and offers ``names``; a call answers with the source's label. With
    ``listing``, its listing runs that coroutine first."""

    def __init__(self, label: str, *names: str, listing: Any = None) -> None:
        self.label = label
        self.names = names
        self.listing = listing

    def owns(self, name: str) -> bool:
        return name in self.names

    def is_extension(self, name: str) -> bool:
        return self.label == "mcp"

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        if self.listing is not None:
            await self.listing()
        return [ToolSpec(name=n, description=self.label) for n in self.names]

    async def call(
        self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any
    ) -> str:
        return f"{self.label} ran {name}"


class Forgetful(ServerTools):
    """A source that says neither what it owns nor whether its tools are
    extensions. mypy refuses to build one (``make lint`` fails on an unused
    ``type: ignore``, so the two below show it does); at run time it still must
    not capture the names of the sources after it."""

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        return [ToolSpec(name="lookup", description="forgetful")]

    async def call(
        self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any
    ) -> str:
        return "the forgetful source ran it"


async def test_a_source_that_does_not_say_what_it_owns_claims_no_name() -> None:
    forgetful = Forgetful()  # type: ignore[abstract]
    assert not forgetful.owns("lookup")
    assert not forgetful.is_extension("lookup")
    hub = ToolHub([forgetful, Named("mcp", "lookup")])
    assert hub.owns("lookup")
    assert hub.is_extension("lookup")  # the owner's answer, not the forgetful one's
    assert await hub.call(WHO, AGENT, "lookup", {}, CTX) == "mcp ran lookup"
    alone = ToolHub([Forgetful()])  # type: ignore[abstract]
    assert not alone.owns("lookup")
    assert not alone.is_extension("lookup")
    assert await alone.call(WHO, AGENT, "lookup", {}, CTX) == (
        "error: no server-side tool named 'lookup'"
    )


async def test_the_sources_are_listed_concurrently_and_their_tools_kept_in_order() -> None:
    first_may_end, second_may_end = asyncio.Event(), asyncio.Event()
    ended: list[str] = []

    async def first() -> None:  # lets the second end, then waits for it
        second_may_end.set()
        await first_may_end.wait()
        ended.append("first")

    async def second() -> None:  # ends only once the first has started
        await second_may_end.wait()
        first_may_end.set()
        ended.append("second")

    hub = ToolHub(
        [
            Named("a", "a_one", "a_two", listing=first),
            Named("b", "b_one", listing=second),
            Named("c", "c_one"),
        ]
    )
    # listed one after another, the first would wait for the second for ever
    async with asyncio.timeout(10):
        tools = await hub.list_tools(WHO, AGENT)
    assert ended == ["second", "first"]
    assert [t.name for t in tools] == ["a_one", "a_two", "b_one", "c_one"]


async def test_a_source_that_cannot_list_is_left_out_and_the_others_still_serve(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise Unavailable("the server is down")

    caplog.set_level(logging.WARNING, logger="agentsvc.tools")
    hub = ToolHub([Named("a", "a_one"), Named("b", "b_one", listing=fail), Named("c", "c_one")])
    assert [t.name for t in await hub.list_tools(WHO, AGENT)] == ["a_one", "c_one"]
    assert [r.getMessage() for r in caplog.records] == [
        f"tools of Named left out of a turn of agent {AGENT.id}: the server is down"
    ]


async def test_an_unexpected_failure_of_a_listing_propagates() -> None:
    async def bug() -> None:
        raise RuntimeError("a bug")

    hub = ToolHub([Named("a", "a_one"), Named("b", "b_one", listing=bug)])
    with pytest.raises(RuntimeError, match="a bug"):
        await hub.list_tools(WHO, AGENT)
