"""The web tools: an agent's web configuration (``GET/PUT /api/agents/{id}/web``,
a sealed record of kind ``web`` like the compaction configuration) and the tool
source that offers ``web_fetch`` and ``web_search`` by it (docs/tools.md, "Web")."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import idna
import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import DomainError, InvalidInput, Upstream
from agentsvc_core.ports import (
    AgentRepository,
    SecretBox,
    SecretStore,
    ServerTools,
    ToolCallContext,
    ToolSetup,
    ToolSpec,
)
from agentsvc_core.ports.web import (
    FetchLimits,
    SearchHit,
    WebFetcher,
    WebFetchFailed,
    WebSearch,
    domain_refusal,
)
from agentsvc_core.use_cases.agent_settings import AgentSettings

__all__ = [
    "FETCH_TOOL",
    "SEARCH_TOOL",
    "WebConfig",
    "WebSettings",
    "WebTools",
    "normalise_domain",
]

KIND = "web"
FETCH_TOOL = "web_fetch"
SEARCH_TOOL = "web_search"

MIN_FETCH_BYTES, MAX_FETCH_BYTES = 1024, 10 * 1024 * 1024
MIN_TEXT_CHARS, MAX_TEXT_CHARS = 1000, 200_000
MIN_FETCH_TIMEOUT_MS, MAX_FETCH_TIMEOUT_MS = 1000, 60_000
MIN_RESULTS, MAX_RESULTS = 1, 20
MAX_DOMAINS = 100
MAX_DOMAIN = 253
MAX_URL = 8192
MAX_QUERY = 400  # characters: the search APIs' own limit (Brave: 400 and 50 words)
SEARCH_SETTING = "AGENTSVC_WEB_SEARCH_API_KEY"
_LABELS = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


class WebConfig(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: UUID
    org_id: str
    fetch_enabled: bool = False
    search_enabled: bool = False
    max_fetch_bytes: int = 2 * 1024 * 1024  # read of a page's body, then it is cut
    max_text_chars: int = 20_000  # of the text web_fetch answers, then it is cut
    fetch_timeout_ms: int = 10_000  # the whole fetch, redirects included
    max_results: int = 5  # web_search
    allowed_domains: tuple[str, ...] = ()  # none: any (the outbound guard still applies)
    blocked_domains: tuple[str, ...] = ()


_BOUNDS = (
    ("max_fetch_bytes", MIN_FETCH_BYTES, MAX_FETCH_BYTES),
    ("max_text_chars", MIN_TEXT_CHARS, MAX_TEXT_CHARS),
    ("fetch_timeout_ms", MIN_FETCH_TIMEOUT_MS, MAX_FETCH_TIMEOUT_MS),
    ("max_results", MIN_RESULTS, MAX_RESULTS),
)


def normalise_domain(field: str, value: str) -> str:
    """A domain of the allowed or blocked list as it is matched: lowercase ASCII
    (IDNA, as the outbound guard normalises hosts), no trailing dot; a leading
    ``*.`` is accepted and dropped (a domain always covers its subdomains)."""
    name = value.strip().lower()
    name = name.removeprefix("*.")
    if not name.isascii():
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except idna.IDNAError:
            name = ""
    name = name.rstrip(".")
    if not name or len(name) > MAX_DOMAIN or not _LABELS.fullmatch(name):
        raise InvalidInput(
            field, f"{value!r} is not a domain (a host name such as example.com, no scheme or path)"
        )
    return name


def _domains(field: str, values: object) -> tuple[str, ...]:
    if not isinstance(values, list | tuple):
        raise InvalidInput(field, "must be a list of domains")
    if len(values) > MAX_DOMAINS:
        raise InvalidInput(field, f"at most {MAX_DOMAINS} domains")
    return tuple(dict.fromkeys(normalise_domain(field, str(v)) for v in values))


class WebSettings(AgentSettings[WebConfig]):
    """Per-agent web configuration. ``search_provider``: the search engine the
    service is configured with (``None``: none, so search cannot be enabled)."""

    def __init__(
        self,
        store: SecretStore,
        agents: AgentRepository,
        box: SecretBox,
        *,
        search_provider: str | None,
    ) -> None:
        super().__init__(store, agents, box, KIND, WebConfig)
        self.search_provider = search_provider

    async def update(self, who: Principal, agent_id: UUID, changes: dict[str, Any]) -> WebConfig:
        """Only the supplied fields change (a concurrent PUT of others is not lost);
        bounds are checked on the result. Search cannot be switched on while the
        service has no search provider."""

        def apply(current: WebConfig) -> WebConfig:
            given = dict(changes)
            for field in ("allowed_domains", "blocked_domains"):
                if field in given:
                    given[field] = _domains(field, given[field])
            if given.get("search_enabled") and self.search_provider is None:
                raise InvalidInput(
                    "search_enabled",
                    f"no web search provider is configured on this service: set "
                    f"{SEARCH_SETTING} (and AGENTSVC_WEB_SEARCH_PROVIDER, brave by default)",
                )
            updated = msgspec.structs.replace(current, **given)
            for field, lo, hi in _BOUNDS:
                if not lo <= getattr(updated, field) <= hi:
                    raise InvalidInput(field, f"must be between {lo} and {hi}")
            return updated

        return await self._change(who, agent_id, apply)


FETCH_SPEC = ToolSpec(
    name=FETCH_TOOL,
    description=(
        "Read a web page: GET an http(s) URL and return its title, its final URL (after "
        "redirects) and its readable text. HTML is reduced to its main text (headings, "
        "lists and tables as Markdown); plain text, Markdown and JSON come as they are; "
        "other types (images, PDF...) are refused. Long pages are cut."
    ),
    parameters={
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The page's http:// or https:// URL"}
        },
        "required": ["url"],
        "additionalProperties": False,
    },
)
SEARCH_SPEC = ToolSpec(
    name=SEARCH_TOOL,
    description=(
        "Search the web. Returns the best results, each with its title, URL and a "
        "snippet; read a result with web_fetch."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": f"What to search for (at most {MAX_QUERY} characters)",
            }
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


def _host_of(url: str) -> str | None:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    try:
        return idna.encode(host, uts46=True).decode("ascii").rstrip(".")
    except idna.IDNAError:
        return host.rstrip(".")


def page_text(config: WebConfig, url: str, title: str | None, text: str, *, cut: bool) -> str:
    """What ``web_fetch`` answers: title, final URL, the text (capped), and a note
    for each cut."""
    lines = [f"Title: {title}" if title else "Title: (none)", f"URL: {url}", ""]
    body = text.strip() or "(the page has no readable text)"
    if len(body) > config.max_text_chars:
        lines.append(body[: config.max_text_chars])
        lines.append(
            f"\n[cut: the text is {len(body)} characters long; "
            f"the first {config.max_text_chars} are shown]"
        )
    else:
        lines.append(body)
    if cut:
        lines.append(
            f"\n[cut: the page is larger than {config.max_fetch_bytes} bytes; "
            "only its beginning was read]"
        )
    return "\n".join(lines)


def results_text(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Results for {query!r}:"]
    for i, hit in enumerate(hits, 1):
        lines.append(f"\n{i}. {hit.title or '(no title)'}\n   {hit.url}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)


class WebTools(ServerTools):
    """``web_fetch`` and ``web_search``, offered per the agent's web configuration
    (``web_search`` only while the service has a search provider). The turn's
    read brings the configuration (kind ``web``): an agent that never stored one
    costs no read at all."""

    kinds: tuple[str, ...] = (KIND,)

    def __init__(
        self, settings: WebSettings, fetcher: WebFetcher, search: WebSearch | None
    ) -> None:
        self._settings = settings
        self._fetcher = fetcher
        self._search = search

    def owns(self, name: str) -> bool:
        return name in (FETCH_TOOL, SEARCH_TOOL)

    def is_extension(self, name: str) -> bool:
        return False

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        config = await self._settings.in_turn(who.org_id, agent.id, setup)
        tools = []
        if config.fetch_enabled:
            tools.append(FETCH_SPEC)
        if config.search_enabled and self._search is not None:
            tools.append(SEARCH_SPEC)
        return tools

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        try:
            config = await self._settings.in_turn(who.org_id, agent.id, ctx.setup)
        except DomainError as exc:
            return f"error: the agent's web configuration could not be read: {exc.detail}"
        if name == FETCH_TOOL:
            if not config.fetch_enabled:
                return "error: web_fetch is not enabled for this agent"
            return await self._fetch(config, arguments.get("url"))
        if name == SEARCH_TOOL:
            if not config.search_enabled or self._search is None:
                return "error: web_search is not enabled for this agent"
            return await self._search_for(config, self._search, arguments.get("query"))
        return f"error: no web tool named {name!r}"

    async def _fetch(self, config: WebConfig, url: object) -> str:
        if not isinstance(url, str) or not url.strip():
            return "error: web_fetch needs a url (an http:// or https:// URL as a string)"
        if len(url) > MAX_URL:
            return f"error: the url is longer than {MAX_URL} characters"
        limits = FetchLimits(
            max_bytes=config.max_fetch_bytes,
            timeout_ms=config.fetch_timeout_ms,
            allowed_domains=config.allowed_domains,
            blocked_domains=config.blocked_domains,
        )
        try:
            page = await self._fetcher.fetch(url.strip(), limits)
        except WebFetchFailed as exc:
            return f"error: {exc.detail}"
        return page_text(config, page.url, page.title, page.text, cut=page.cut)

    async def _search_for(self, config: WebConfig, search: WebSearch, query: object) -> str:
        if not isinstance(query, str) or not query.strip():
            return "error: web_search needs a query (a string)"
        query = query.strip()
        if len(query) > MAX_QUERY:
            return f"error: the query is longer than {MAX_QUERY} characters"
        filtered = bool(config.allowed_domains or config.blocked_domains)
        try:
            # with domain lists, ask for the most and keep the first that pass
            hits = await search.search(query, MAX_RESULTS if filtered else config.max_results)
        except Upstream as exc:
            return f"error: web search failed: {exc.detail}"
        kept = [
            h
            for h in hits
            if (host := _host_of(h.url)) is not None
            and domain_refusal(host, config.allowed_domains, config.blocked_domains) is None
        ]
        return results_text(query, kept[: config.max_results])
