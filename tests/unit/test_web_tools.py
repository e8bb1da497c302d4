"""The agent's web configuration and the web tool source (use_cases/web.py), over
the memory storage, with fakes of the fetcher and the search engine."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import InvalidInput, NotFound, Upstream
from agentsvc_core.ports import SealedRecord, ToolCallContext, ToolSetup
from agentsvc_core.ports.web import FetchLimits, SearchHit, WebFetchFailed, WebPage
from agentsvc_core.use_cases.web import WebConfig, WebSettings, WebTools
from tests.contract.test_agents_contract import agent_in

ORG = "org-web"
WHO = Principal(org_id=ORG, method="api_key")
BOX = AesGcmBox([("k1", b"\x05" * 32)])


class Fetcher:
    def __init__(self, page: WebPage | None = None, error: str | None = None) -> None:
        self.page = page or WebPage(
            url="https://tea.example/brew",
            title="Tea",
            text="Steep briefly.",
            content_type="text/html",
        )
        self.error = error
        self.calls: list[tuple[str, FetchLimits]] = []

    async def fetch(self, url: str, limits: FetchLimits) -> WebPage:
        self.calls.append((url, limits))
        if self.error:
            raise WebFetchFailed(self.error)
        return self.page


class Search:
    provider = "brave"

    def __init__(self, hits: list[SearchHit] | None = None, error: str | None = None) -> None:
        self.hits = hits or []
        self.error = error
        self.calls: list[tuple[str, int]] = []

    async def search(self, query: str, count: int) -> list[SearchHit]:
        self.calls.append((query, count))
        if self.error:
            raise Upstream(self.error)
        return self.hits[:count]


class CountingSecrets:
    """The memory secret store, counting reads (the turn must not add one)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0

    async def get(self, org_id: str, kind: str, key: str) -> SealedRecord | None:
        self.reads += 1
        return await self.inner.get(org_id, kind, key)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class World:
    def __init__(self, *, search: Search | None = None, fetcher: Fetcher | None = None) -> None:
        self.storage = MemoryStorage()
        self.secrets = CountingSecrets(self.storage.secrets)
        self.search = search
        self.settings = WebSettings(
            self.secrets,
            self.storage.agents,
            BOX,
            search_provider=search.provider if search else None,
        )
        self.fetcher = fetcher or Fetcher()
        self.tools = WebTools(self.settings, self.fetcher, search)

    async def agent(self) -> Agent:
        agent = agent_in(ORG)
        await self.storage.agents.add(agent)
        return agent

    async def setup(self, agent: Agent) -> ToolSetup:
        """What the turn reads: the agent's record of kind web, if stored."""
        found = await self.storage.secrets.get(ORG, "web", str(agent.id))
        return ToolSetup(records={"web": found} if found else {})

    async def call(self, agent: Agent, name: str, **arguments: Any) -> str:
        ctx = ToolCallContext(tool_call_id="c1", setup=await self.setup(agent))
        return await self.tools.call(WHO, agent, name, arguments, ctx)


# --- the configuration ------------------------------------------------------------


async def test_the_defaults_offer_nothing_until_stored() -> None:
    w = World()
    agent = await w.agent()
    config = await w.settings.get(WHO, agent.id)
    assert config == WebConfig(agent_id=agent.id, org_id=ORG)
    assert (config.fetch_enabled, config.search_enabled) == (False, False)
    assert (config.max_fetch_bytes, config.max_text_chars) == (2 * 1024 * 1024, 20_000)
    assert (config.fetch_timeout_ms, config.max_results) == (10_000, 5)
    assert (config.allowed_domains, config.blocked_domains) == ((), ())


async def test_an_update_changes_only_what_it_names_and_is_kept() -> None:
    w = World()
    agent = await w.agent()
    await w.settings.update(WHO, agent.id, {"fetch_enabled": True, "max_results": 7})
    updated = await w.settings.update(WHO, agent.id, {"fetch_timeout_ms": 2000})
    assert (updated.fetch_enabled, updated.max_results, updated.fetch_timeout_ms) == (
        True,
        7,
        2000,
    )
    assert await w.settings.get(WHO, agent.id) == updated


@pytest.mark.parametrize(
    ("field", "lo", "hi"),
    [
        ("max_fetch_bytes", 1024, 10 * 1024 * 1024),
        ("max_text_chars", 1000, 200_000),
        ("fetch_timeout_ms", 1000, 60_000),
        ("max_results", 1, 20),
    ],
)
async def test_bounds_are_inclusive_and_checked(field: str, lo: int, hi: int) -> None:
    w = World()
    agent = await w.agent()
    assert getattr(await w.settings.update(WHO, agent.id, {field: lo}), field) == lo
    assert getattr(await w.settings.update(WHO, agent.id, {field: hi}), field) == hi
    for wrong in (lo - 1, hi + 1):
        with pytest.raises(InvalidInput) as refused:
            await w.settings.update(WHO, agent.id, {field: wrong})
        assert refused.value.field == field
        assert refused.value.problem == f"must be between {lo} and {hi}"
    assert getattr(await w.settings.get(WHO, agent.id), field) == hi  # nothing stored


async def test_domains_are_normalised() -> None:
    w = World()
    agent = await w.agent()
    config = await w.settings.update(
        WHO,
        agent.id,
        {
            "allowed_domains": [
                "Example.COM.",
                "*.docs.example.org",
                "bücher.example",
                "example.com",
            ],
            "blocked_domains": ["10.0.0.5"],
        },
    )
    assert config.allowed_domains == ("example.com", "docs.example.org", "xn--bcher-kva.example")
    assert config.blocked_domains == ("10.0.0.5",)


@pytest.mark.parametrize(
    "domain", ["https://example.com", "example.com/path", "example.com:443", "a b.com", "", "."]
)
async def test_what_is_not_a_domain_is_refused(domain: str) -> None:
    w = World()
    agent = await w.agent()
    with pytest.raises(InvalidInput) as refused:
        await w.settings.update(WHO, agent.id, {"blocked_domains": [domain]})
    assert refused.value.field == "blocked_domains"


async def test_at_most_a_hundred_domains() -> None:
    w = World()
    agent = await w.agent()
    many = [f"d{i}.example" for i in range(101)]
    with pytest.raises(InvalidInput, match="at most 100 domains"):
        await w.settings.update(WHO, agent.id, {"allowed_domains": many})
    kept = await w.settings.update(WHO, agent.id, {"allowed_domains": many[:100]})
    assert len(kept.allowed_domains) == 100


async def test_search_cannot_be_enabled_without_a_search_provider() -> None:
    w = World()
    agent = await w.agent()
    with pytest.raises(InvalidInput) as refused:
        await w.settings.update(WHO, agent.id, {"search_enabled": True})
    assert refused.value.field == "search_enabled"
    assert "AGENTSVC_WEB_SEARCH_API_KEY" in refused.value.problem
    # switching it off is always fine
    assert not (await w.settings.update(WHO, agent.id, {"search_enabled": False})).search_enabled
    with_search = World(search=Search())
    other = await with_search.agent()
    assert (
        await with_search.settings.update(WHO, other.id, {"search_enabled": True})
    ).search_enabled


async def test_another_organizations_agent_is_not_found() -> None:
    w = World()
    agent = await w.agent()
    stranger = Principal(org_id="org-other", method="api_key")
    with pytest.raises(NotFound):
        await w.settings.get(stranger, agent.id)
    with pytest.raises(NotFound):
        await w.settings.update(stranger, agent.id, {"fetch_enabled": True})
    with pytest.raises(NotFound):
        await w.settings.get(WHO, uuid.uuid4())


# --- the tool source ----------------------------------------------------------------


async def test_the_tools_offered_follow_the_configuration() -> None:
    w = World(search=Search())
    agent = await w.agent()

    async def offered() -> list[str]:
        return [t.name for t in await w.tools.list_tools(WHO, agent, await w.setup(agent))]

    assert await offered() == []
    await w.settings.update(WHO, agent.id, {"fetch_enabled": True})
    assert await offered() == ["web_fetch"]
    await w.settings.update(WHO, agent.id, {"search_enabled": True})
    assert await offered() == ["web_fetch", "web_search"]
    # outside a turn (no setup), the source reads the record itself
    assert [t.name for t in await w.tools.list_tools(WHO, agent)] == ["web_fetch", "web_search"]


async def test_search_stored_on_is_not_offered_once_the_provider_is_gone() -> None:
    w = World(search=Search())
    agent = await w.agent()
    await w.settings.update(WHO, agent.id, {"fetch_enabled": True, "search_enabled": True})
    unconfigured = WebTools(w.settings, w.fetcher, None)
    setup = await w.setup(agent)
    assert [t.name for t in await unconfigured.list_tools(WHO, agent, setup)] == ["web_fetch"]
    ctx = ToolCallContext(tool_call_id="c1", setup=setup)
    answer = await unconfigured.call(WHO, agent, "web_search", {"query": "tea"}, ctx)
    assert answer == "error: web_search is not enabled for this agent"


async def test_a_turn_costs_no_storage_read() -> None:
    w = World(search=Search())
    agent = await w.agent()
    ctx = ToolCallContext(tool_call_id="c1", setup=ToolSetup())
    assert await w.tools.list_tools(WHO, agent, ToolSetup()) == []
    assert await w.tools.call(WHO, agent, "web_fetch", {"url": "https://x.example"}, ctx) == (
        "error: web_fetch is not enabled for this agent"
    )
    assert w.secrets.reads == 0
    assert w.fetcher.calls == []


def test_names_owned_and_traced_as_tools() -> None:
    tools = World().tools
    assert tools.kinds == ("web",)
    assert tools.owns("web_fetch")
    assert tools.owns("web_search")
    for other in ("web_browse", "web", "docs__web_fetch", "plan_create"):
        assert not tools.owns(other)
    assert not tools.is_extension("web_fetch")


async def test_fetch_answers_title_url_and_text_with_the_agents_limits() -> None:
    w = World()
    agent = await w.agent()
    await w.settings.update(
        WHO,
        agent.id,
        {
            "fetch_enabled": True,
            "max_fetch_bytes": 4096,
            "fetch_timeout_ms": 3000,
            "allowed_domains": ["tea.example"],
            "blocked_domains": ["ads.tea.example"],
        },
    )
    answer = await w.call(agent, "web_fetch", url=" https://tea.example/r ")
    assert answer == "Title: Tea\nURL: https://tea.example/brew\n\nSteep briefly."
    assert w.fetcher.calls == [
        (
            "https://tea.example/r",
            FetchLimits(
                max_bytes=4096,
                timeout_ms=3000,
                allowed_domains=("tea.example",),
                blocked_domains=("ads.tea.example",),
            ),
        )
    ]


async def test_long_text_is_cut_with_a_note_and_so_is_a_cut_download() -> None:
    page = WebPage(
        url="https://x.example/", title=None, text="x" * 1500, content_type="text/plain", cut=True
    )
    w = World(fetcher=Fetcher(page))
    agent = await w.agent()
    await w.settings.update(WHO, agent.id, {"fetch_enabled": True, "max_text_chars": 1000})
    answer = await w.call(agent, "web_fetch", url="https://x.example/")
    head, body = answer.split("\n\n", 1)
    assert head == "Title: (none)\nURL: https://x.example/"
    assert body.startswith(
        "x" * 1000 + "\n\n[cut: the text is 1500 characters long; the first 1000 are shown]"
    )
    assert "x" * 1001 not in body
    assert body.endswith(
        "[cut: the page is larger than 2097152 bytes; only its beginning was read]"
    )


async def test_fetch_failures_and_bad_arguments_are_errors_the_model_reads() -> None:
    w = World(fetcher=Fetcher(error="127.0.0.1 answered HTTP 404"))
    agent = await w.agent()
    await w.settings.update(WHO, agent.id, {"fetch_enabled": True})
    assert await w.call(agent, "web_fetch", url="https://x.example") == (
        "error: 127.0.0.1 answered HTTP 404"
    )
    for args in ({}, {"url": 5}, {"url": "  "}):
        assert (await w.call(agent, "web_fetch", **args)).startswith("error: web_fetch needs a url")
    assert (await w.call(agent, "web_fetch", url="https://x.example/" + "a" * 8200)).startswith(
        "error: the url is longer than 8192 characters"
    )
    assert len(w.fetcher.calls) == 1


async def test_search_lists_results_and_keeps_to_the_agents_domains() -> None:
    hits = [
        SearchHit(title="Brew", url="https://tea.example/brew", snippet="Steep it."),
        SearchHit(title="Ad", url="https://ads.tea.example/x", snippet="Buy."),
        SearchHit(title="Other", url="https://other.example/", snippet=""),
    ]
    w = World(search=Search(hits))
    agent = await w.agent()
    await w.settings.update(WHO, agent.id, {"search_enabled": True, "max_results": 3})
    answer = await w.call(agent, "web_search", query="green tea")
    assert answer == (
        "Results for 'green tea':\n"
        "\n1. Brew\n   https://tea.example/brew\n   Steep it.\n"
        "\n2. Ad\n   https://ads.tea.example/x\n   Buy.\n"
        "\n3. Other\n   https://other.example/"
    )
    assert w.search is not None
    assert w.search.calls == [("green tea", 3)]
    await w.settings.update(
        WHO, agent.id, {"blocked_domains": ["ads.tea.example"], "max_results": 1}
    )
    answer = await w.call(agent, "web_search", query="green tea")
    assert (
        answer == "Results for 'green tea':\n\n1. Brew\n   https://tea.example/brew\n   Steep it."
    )
    assert w.search.calls[-1] == ("green tea", 20)  # with domain lists: ask for the most
    await w.settings.update(
        WHO, agent.id, {"blocked_domains": [], "allowed_domains": ["nowhere.example"]}
    )
    assert await w.call(agent, "web_search", query="tea") == "No results for 'tea'."


async def test_search_failures_and_bad_queries_are_errors_the_model_reads() -> None:
    w = World(search=Search(error="the brave search API answered HTTP 500"))
    agent = await w.agent()
    await w.settings.update(WHO, agent.id, {"search_enabled": True})
    assert await w.call(agent, "web_search", query="tea") == (
        "error: web search failed: the brave search API answered HTTP 500"
    )
    assert (await w.call(agent, "web_search")).startswith("error: web_search needs a query")
    assert (await w.call(agent, "web_search", query="q" * 401)).startswith(
        "error: the query is longer than 400 characters"
    )


async def test_the_hub_of_the_service_routes_web_names_to_the_web_source() -> None:
    """Among every source the service composes (bootstrap), ``web_fetch`` and
    ``web_search`` are the web source's: no other source (webhook tools take names
    without ``__``) claims a built-in name."""
    from agentsvc_web.bootstrap import build_services  # noqa: PLC0415
    from agentsvc_web.settings import Settings  # noqa: PLC0415

    services = build_services(Settings(storage="memory"))
    try:
        sources = services._tool_sources(services.mcp_client)
        for name in ("web_fetch", "web_search"):
            owners = [type(s).__name__ for s in sources if s.owns(name)]
            assert owners == ["WebTools"], (name, owners)
    finally:
        for close in services.closers:
            await close()
