"""What an organization keeps and configures through the API: its keys and who
may call (API keys, JWTs), agents and threads, MCP servers (with their OAuth and
the registry's search), its settings (the resolver, compaction), projects, the
official templates and agents' marketplace profiles."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol
from uuid import UUID

from agentsvc_adapters.images import PillowImages
from agentsvc_adapters.templates import PackagedTemplates
from agentsvc_core.ports import (
    Clock,
    McpClient,
    Revocations,
    SecretBox,
    Storage,
    TokenVerifier,
)
from agentsvc_core.ports.managed_oauth import ManagedCatalogue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.oauth import OAuthNetwork
from agentsvc_core.ports.registry import McpRegistry
from agentsvc_core.use_cases import Agents, ApiKeys, Authenticator, Threads
from agentsvc_core.use_cases.agent_asks import ask_agent
from agentsvc_core.use_cases.capabilities import AgentCapabilities
from agentsvc_core.use_cases.integrations import Integrations
from agentsvc_core.use_cases.knowledge.documents import Knowledge
from agentsvc_core.use_cases.managed_oauth import ManagedOAuth
from agentsvc_core.use_cases.marketplace import Marketplace
from agentsvc_core.use_cases.mcp_oauth import McpOAuth
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.memories.memories import MemorySettings
from agentsvc_core.use_cases.multiplayer.config import MultiplayerSettings
from agentsvc_core.use_cases.org_settings import CompactionSettings, OrgSettings
from agentsvc_core.use_cases.plan_tools import PlanSettings
from agentsvc_core.use_cases.projects import Projects
from agentsvc_core.use_cases.registry import RegistrySearch
from agentsvc_core.use_cases.skills.bindings import SkillBindings, registry_giver
from agentsvc_core.use_cases.skills.skills import Skills
from agentsvc_core.use_cases.templates import Templates
from agentsvc_core.use_cases.turn.conversation import Conversation
from agentsvc_core.use_cases.web import WebSettings
from agentsvc_core.use_cases.webhook_tools import WebhookTools
from agentsvc_web.settings import Settings


class Identity(NamedTuple):
    api_keys: ApiKeys
    authenticator: Authenticator
    threads: Threads


def identity(
    settings: Settings,
    storage: Storage,
    clock: Clock,
    verifier: TokenVerifier | None,
    revocations: Revocations,
    multiplayer: MultiplayerSettings,
) -> Identity:
    """Who calls (API keys, cached and revoked across processes, or JWTs) and the
    threads they work with (``multiplayer``: the agents' multiplayer configurations,
    who may open a multiplayer thread and how many people it may have)."""
    return Identity(
        api_keys=ApiKeys(storage.api_keys, storage.organizations, clock, revocations),
        authenticator=Authenticator(
            storage.api_keys,
            storage.organizations,
            clock,
            verifier,
            key_cache_s=settings.api_key_cache_s,
            revocations=revocations,
        ),
        threads=Threads(storage.threads, storage.agents, storage.conversations, clock, multiplayer),
    )


def agents(
    settings: Settings,
    storage: Storage,
    clock: Clock,
    kinds: tuple[str, ...],
    before_delete: Sequence[Callable[[str, UUID], Awaitable[None]]] = (),
) -> Agents:
    """The agents; deleting one deletes its configurations, the sealed records of
    ``kinds`` (the turn's and each tool source's), which is why they are built after
    the tool sources, and first calls ``before_delete`` (its computers' sandboxes)."""
    return Agents(
        storage.agents,
        clock,
        settings.default_model,
        configs=(storage.secrets, kinds),
        projects=storage.projects,
        before_delete=before_delete,
    )


def projects(storage: Storage, clock: Clock) -> Projects:
    """Projects, over the agents and runners that name them."""
    return Projects(storage.projects, storage.agents, storage.runners, clock)


class McpArea(NamedTuple):
    registry_search: RegistrySearch
    oauth: McpOAuth
    mcps: McpServers
    managed: ManagedOAuth


def mcp_servers(
    settings: Settings,
    storage: Storage,
    clock: Clock,
    box: SecretBox,
    urls: UrlPolicy,
    client: McpClient,
    registry: McpRegistry,
    oauth_network: OAuthNetwork,
    managed_catalogue: ManagedCatalogue,
) -> McpArea:
    """The organization's MCP servers, the OAuth flows that authorize them, the
    managed providers connected in one click and the registry they may be found in."""
    oauth = McpOAuth(storage.secrets, oauth_network, box, clock, settings.base_url)
    managed = ManagedOAuth(
        managed_catalogue,
        oauth,
        storage.mcps,
        storage.agents,
        storage.secrets,
        oauth_network,
        box,
        clock,
        settings.base_url,
    )
    mcps = McpServers(
        storage.mcps,
        storage.agents,
        client,
        box,
        urls,
        clock,
        allow_stdio=settings.allow_stdio_mcp,
        oauth=oauth,
        runners=storage.runners,
        managed=managed,  # the turn filters a provider's tools by its services
    )
    return McpArea(RegistrySearch(registry), oauth, mcps, managed)


def org_settings(
    settings: Settings, storage: Storage, clock: Clock, box: SecretBox, urls: UrlPolicy
) -> tuple[OrgSettings, CompactionSettings]:
    """The organization's settings (its credential resolver) and agents' compaction."""
    return (
        OrgSettings(
            storage.secrets,
            storage.agents,
            box,
            urls,
            clock,
            allow_http=settings.allow_private_network,
            retention=storage.erasure,
        ),
        CompactionSettings(storage.secrets, storage.agents, box),
    )


class _Configured(Protocol):
    """What the templates need of ``Services``: the agents, the updates of the
    configurations a template sets, and the skills it gives."""

    agents: Agents
    web: WebSettings
    plan_settings: PlanSettings
    memory_settings: MemorySettings
    compaction: CompactionSettings
    skills: Skills
    skill_bindings: SkillBindings


def templates(s: _Configured) -> Templates:
    """The official templates shipped with the package, made into agents with
    their configurations and skills (each a skill of the shipped registry, which
    the service checks at start-up)."""
    shipped = PackagedTemplates()
    for template in shipped.templates():
        for registry_id in template.skills:
            if not s.skills.in_registry(registry_id):
                raise ValueError(f"template {template.id}: no skill {registry_id!r} is shipped")

    return Templates(
        shipped,
        s.agents,
        {
            "web": s.web.update,
            "plan": s.plan_settings.update,
            "memory": s.memory_settings.update,
            "compaction": s.compaction.update,
        },
        registry_giver(s.skills, s.skill_bindings),
    )


class _Listed(_Configured, Protocol):
    """What the marketplace needs of ``Services`` besides the configurations."""

    threads: Threads
    conversation: Conversation
    knowledge: Knowledge
    integrations: Integrations
    mcps: McpServers
    webhook_tools: WebhookTools
    skill_bindings: SkillBindings


def marketplace(s: _Listed, storage: Storage, clock: Clock) -> Marketplace:
    """Agents' marketplace profiles: pictures checked and re-encoded by Pillow,
    descriptions written by the agent's own model (a turn of its own), and the
    capabilities found in what the agent is given."""

    async def ask(org_id: str, agent_id: UUID, prompt: str) -> str:
        return await ask_agent(
            s.threads,
            s.conversation,
            org_id,
            agent_id,
            prompt,
            title="marketplace description",
            metadata={"purpose": "marketplace"},
        )

    capabilities = AgentCapabilities(
        web=s.web,
        knowledge=s.knowledge,
        memory=s.memory_settings,
        plan=s.plan_settings,
        integrations=s.integrations,
        mcps=s.mcps,
        webhook_tools=s.webhook_tools,
        skills=s.skill_bindings,
    )
    return Marketplace(
        storage.marketplace, storage.agents, PillowImages(), clock, ask=ask, sources=[capabilities]
    )
