"""The turn's server-side tools and the areas behind them: MCP servers' tools,
webhook tools, database integrations, plans, memories, knowledge, the web tools,
skills and the computer,
each a tool source (``ServerTools``) that ``tool_sources`` lists in the order the
model sees them."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from agentsvc_adapters.documents import FileParser
from agentsvc_adapters.git import GitSkillSource
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.skill_registry import PackagedSkills
from agentsvc_adapters.sqldb import PostgresDatabases
from agentsvc_adapters.web import HttpWebFetcher
from agentsvc_core.ports import (
    Clock,
    ModelRouter,
    SecretBox,
    ServerTools,
    SqlDatabases,
    Storage,
    WebhookCaller,
)
from agentsvc_core.ports.documents import DocumentParser
from agentsvc_core.ports.embeddings import Embedder
from agentsvc_core.ports.event_webhooks import EventPublisher
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.skill_sources import SkillSource
from agentsvc_core.ports.web import WebSearch
from agentsvc_core.pricing import PriceTable
from agentsvc_core.use_cases import Threads
from agentsvc_core.use_cases.computer import ComputerTools
from agentsvc_core.use_cases.integration_tools import IntegrationTools
from agentsvc_core.use_cases.integrations import Integrations
from agentsvc_core.use_cases.knowledge.documents import Knowledge, KnowledgeLimits
from agentsvc_core.use_cases.knowledge.tools import KnowledgeTools
from agentsvc_core.use_cases.mcp_servers import McpTools
from agentsvc_core.use_cases.memories.collect import MemoryCollector
from agentsvc_core.use_cases.memories.memories import Memories, MemorySettings
from agentsvc_core.use_cases.memories.tools import MemoryTools
from agentsvc_core.use_cases.org_settings import KeyBroker, OrgSettings
from agentsvc_core.use_cases.plan_tools import PlanSettings, PlanTools
from agentsvc_core.use_cases.plans import Plans
from agentsvc_core.use_cases.skills.bindings import SkillBindings, SkillTools
from agentsvc_core.use_cases.skills.skills import Skills
from agentsvc_core.use_cases.web import WebSettings, WebTools
from agentsvc_core.use_cases.webhook_tools import WebhookTools, WebhookToolSource
from agentsvc_web.settings import Settings

if TYPE_CHECKING:
    from agentsvc_web.bootstrap.services import Services


def tool_sources(services: Services) -> list[ServerTools]:
    """The server-side tool sources of a turn, in the order the model sees them."""
    s = services
    return [
        McpTools(s.mcps, s.mcp_client),
        WebhookToolSource(s.webhook_tools, s.storage.webhook_tools),
        IntegrationTools(s.integrations, s.databases),
        PlanTools(s.plans, s.plan_settings),
        MemoryTools(s.memories, s.memory_settings),
        KnowledgeTools(s.knowledge),
        WebTools(s.web, s.web_fetcher, s.web_search),
        SkillTools(s.skill_bindings, s.storage.skills),
        ComputerTools(s.computers),
    ]


class SkillArea(NamedTuple):
    skills: Skills
    skill_bindings: SkillBindings


def skills(storage: Storage, box: SecretBox, clock: Clock, source: SkillSource) -> SkillArea:
    """The organization's skills (fetched through the guard by ``source``), the
    shipped registry, and the agents' bindings."""
    return SkillArea(
        Skills(storage.skills, source, PackagedSkills(), clock),
        SkillBindings(storage.secrets, storage.agents, box, storage.skills),
    )


def own_skill_source(settings: Settings, urls: UrlPolicy) -> GitSkillSource:
    """The skills' fetcher for a host that passes none (a test): over the outbound
    guard it was given, or a guard of its own."""
    return GitSkillSource(
        urls
        if isinstance(urls, OutboundGuard)
        else OutboundGuard(allow_private_network=settings.allow_private_network)
    )


def webhook_tools(
    storage: Storage,
    box: SecretBox,
    caller: WebhookCaller,
    urls: UrlPolicy,
    clock: Clock,
    org_settings: OrgSettings,
) -> WebhookTools:
    """The organization's webhook tools, called signed through the outbound guard."""
    return WebhookTools(
        storage.webhook_tools,
        storage.agents,
        storage.threads,
        storage.secrets,
        box,
        caller,
        urls,
        clock,
        org_settings,
    )


def integrations(
    settings: Settings,
    storage: Storage,
    box: SecretBox,
    clock: Clock,
    databases: SqlDatabases | None,
) -> tuple[SqlDatabases, Integrations]:
    """Database integrations: the customer's databases, read-only, through the
    guard (a host may pass its own ``databases``, a test's)."""
    databases = databases or PostgresDatabases(allow_private_network=settings.allow_private_network)
    return databases, Integrations(
        storage.integrations, storage.agents, storage.secrets, databases, box, clock
    )


def plans(
    storage: Storage, threads: Threads, box: SecretBox, clock: Clock
) -> tuple[Plans, PlanSettings]:
    """Threads' plans and todos, and the agents' plan configuration."""
    return Plans(storage.plans, threads, clock), PlanSettings(storage.secrets, storage.agents, box)


def web_settings(storage: Storage, box: SecretBox, search: WebSearch | None) -> WebSettings:
    """The agents' web configuration (search only while the service has an engine)."""
    return WebSettings(
        storage.secrets,
        storage.agents,
        box,
        search_provider=search.provider if search is not None else None,
    )


def own_web_fetcher(settings: Settings, urls: UrlPolicy) -> HttpWebFetcher:
    """``web_fetch``'s client for a host that passes none (a test): over the
    outbound guard it was given, or a guard of its own."""
    return HttpWebFetcher(
        urls
        if isinstance(urls, OutboundGuard)
        else OutboundGuard(allow_private_network=settings.allow_private_network)
    )


def knowledge(
    settings: Settings,
    storage: Storage,
    threads: Threads,
    jobs: JobQueue,
    clock: Clock,
    parser: DocumentParser | None,
    embedder: Embedder | None,
    events: EventPublisher,
) -> Knowledge:
    """Knowledge documents, indexed by background jobs, searched by the tool."""
    return Knowledge(
        storage.knowledge,
        storage.agents,
        threads,
        jobs,
        parser or FileParser(),
        clock,
        embedder=embedder,
        limits=KnowledgeLimits(max_bytes=settings.knowledge_max_bytes),
        events=events,
    )


class MemoryArea(NamedTuple):
    memories: Memories
    memory_settings: MemorySettings
    memory_collector: MemoryCollector


def memory(
    storage: Storage,
    box: SecretBox,
    clock: Clock,
    router: ModelRouter,
    keys: KeyBroker,
    org_settings: OrgSettings,
    jobs: JobQueue,
    prices: PriceTable,
) -> MemoryArea:
    """Agents' memories, their configuration and their collection after turns."""
    settings = MemorySettings(storage.secrets, storage.agents, box)
    memories = Memories(storage.memories, storage.agents, clock, settings, storage.threads)
    collector = MemoryCollector(
        memories,
        settings,
        storage.memories,
        storage.conversations,
        storage.agents,
        router,
        keys,
        org_settings,
        jobs,
        clock,
        prices,
    )
    return MemoryArea(memories, settings, collector)
