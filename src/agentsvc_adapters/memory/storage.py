from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_adapters.memory.channels import MemoryChannels
from agentsvc_adapters.memory.code_sessions import MemoryCodeSessions
from agentsvc_adapters.memory.computer import MemoryComputers
from agentsvc_adapters.memory.conversations import MemoryConversations, MemoryThreads
from agentsvc_adapters.memory.erasure import MemoryErasure
from agentsvc_adapters.memory.event_webhooks import MemoryEventWebhooks
from agentsvc_adapters.memory.idempotency import MemoryIdempotency
from agentsvc_adapters.memory.integrations import MemoryIntegrations
from agentsvc_adapters.memory.knowledge import MemoryKnowledge
from agentsvc_adapters.memory.marketplace import MemoryMarketplace
from agentsvc_adapters.memory.mcps import MemoryMcps
from agentsvc_adapters.memory.memories import MemoryMemories
from agentsvc_adapters.memory.plans import MemoryPlans
from agentsvc_adapters.memory.projects import MemoryProjects, detach_members, naming_a_project
from agentsvc_adapters.memory.publishing import MemoryPublishing
from agentsvc_adapters.memory.runners import MemoryRunners
from agentsvc_adapters.memory.secrets import MemorySecrets
from agentsvc_adapters.memory.skills import MemorySkills
from agentsvc_adapters.memory.traces import MemoryTraces
from agentsvc_adapters.memory.webhook_tools import MemoryWebhookTools
from agentsvc_adapters.storage import Repositories, StorageFacade
from agentsvc_core.entities import Agent, ApiKey, Organization, Thread
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import (
    AgentRepository,
    ApiKeyRepository,
    McpRepository,
    OrganizationRepository,
    SecretStore,
    TurnInputs,
    TurnReader,
)


class MemoryOrganizations(OrganizationRepository):
    def __init__(self) -> None:
        self._orgs: dict[str, Organization] = {}

    async def ensure(self, org: Organization) -> Organization:
        return self._orgs.setdefault(org.id, org)

    async def get(self, org_id: str) -> Organization:
        try:
            return self._orgs[org_id]
        except KeyError:
            raise NotFound("organization not found") from None


class MemoryApiKeys(ApiKeyRepository):
    def __init__(self) -> None:
        self._by_hash: dict[str, ApiKey] = {}

    async def add(self, key: ApiKey) -> None:
        self._by_hash.setdefault(key.key_hash, key)

    async def find_by_hash(self, key_hash: str) -> ApiKey | None:
        return self._by_hash.get(key_hash)

    async def list(self, org_id: str) -> list[ApiKey]:
        keys = [k for k in self._by_hash.values() if k.org_id == org_id]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    async def revoke(self, org_id: str, key_id: UUID, at: datetime) -> ApiKey:
        for key in self._by_hash.values():
            if key.org_id == org_id and key.id == key_id:
                if key.revoked_at is not None:
                    return key
                revoked = msgspec.structs.replace(key, revoked_at=at)
                self._by_hash[key.key_hash] = revoked
                return revoked
        raise NotFound("API key not found")


class MemoryAgents(AgentRepository):
    def __init__(self, project_exists: Callable[[str, UUID], bool]) -> None:
        # Keyed by (org, id): a lookup with the wrong org finds nothing.
        self._agents: dict[tuple[str, UUID], Agent] = {}
        self._project_exists = project_exists  # PostgreSQL's foreign key
        # what goes with an agent (PostgreSQL: ON DELETE CASCADE)
        self.on_delete: list[Callable[[str, UUID], None]] = []

    async def add(self, agent: Agent) -> None:
        self._agents[(agent.org_id, agent.id)] = naming_a_project(self._project_exists, agent)

    def _get(self, org_id: str, agent_id: UUID) -> Agent:
        try:
            return self._agents[(org_id, agent_id)]
        except KeyError:
            raise NotFound("agent not found") from None

    async def get(self, org_id: str, agent_id: UUID) -> Agent:
        return self._get(org_id, agent_id)

    def has(self, org_id: str, agent_id: UUID) -> bool:
        return (org_id, agent_id) in self._agents

    async def list(self, org_id: str, *, project_id: UUID | None = None) -> list[Agent]:
        agents = [
            a
            for (org, _), a in self._agents.items()
            if org == org_id and (project_id is None or a.project_id == project_id)
        ]
        return sorted(agents, key=lambda a: (a.created_at, a.id))

    def detach(self, org_id: str, project_id: UUID) -> int:
        """The agents of the project let go of it (``MemoryProjects.delete``)."""
        return detach_members(self._agents, org_id, project_id)

    async def modify(self, org_id: str, agent_id: UUID, change: Callable[[Agent], Agent]) -> Agent:
        updated = naming_a_project(self._project_exists, change(self._get(org_id, agent_id)))
        self._agents[(org_id, agent_id)] = updated
        return updated

    async def delete(self, org_id: str, agent_id: UUID) -> None:
        self._get(org_id, agent_id)
        del self._agents[(org_id, agent_id)]
        for drop in self.on_delete:
            drop(org_id, agent_id)


class MemoryTurnReader(TurnReader):
    """The turn's reads, composed from the other repositories (in memory there is
    no round trip to save)."""

    def __init__(
        self,
        threads: MemoryThreads,
        agents: AgentRepository,
        conversations: MemoryConversations,
        mcps: McpRepository,
        secrets: SecretStore,
    ) -> None:
        self._threads = threads
        self._agents = agents
        self._conversations = conversations
        self._mcps = mcps
        self._secrets = secrets

    async def turn_inputs(self, org_id: str, thread_id: UUID, kinds: list[str]) -> TurnInputs:
        thread = self._threads.stored(org_id, thread_id)
        try:
            agent: Agent | None = await self._agents.get(org_id, thread.agent_id)
        except NotFound:
            agent = None
        attached = await self._mcps.attachments(org_id, "agent", thread.agent_id)
        found = await self._secrets.get_many(org_id, [(k, str(thread.agent_id)) for k in kinds])
        history, mark = self._conversations.messages(org_id, thread_id)
        return TurnInputs(
            thread=thread,
            agent=agent,
            latest_run=await self._conversations.latest_run(org_id, thread_id),
            mcp=[(a, await self._mcps.get(org_id, a.mcp_id)) for a in attached],
            records={kind: record for (kind, _), record in sorted(found.items())},
            history=history,
            history_mark=mark,
        )


class MemoryStorage(StorageFacade):
    def __init__(self) -> None:
        projects = MemoryProjects()
        agents = MemoryAgents(projects.has)
        idempotency = MemoryIdempotency()
        conversations = MemoryConversations(idempotency)
        self._threads = MemoryThreads(conversations)
        conversations.move_head = self._threads.move_head
        traces = MemoryTraces(conversations.all_usage, self._all_threads)
        conversations.traces = traces
        mcps = MemoryMcps()
        secrets = MemorySecrets()
        memories = MemoryMemories(agents.has)
        agents.on_delete.append(memories.drop_agent)
        knowledge = MemoryKnowledge(agents.has, self._threads.has)
        agents.on_delete.append(knowledge.drop_agent)
        runners = MemoryRunners(agents.has, projects.has)
        agents.on_delete.append(runners.drop_agent)
        projects.detach.update(agents=agents.detach, runners=runners.detach)
        marketplace = MemoryMarketplace(agents.has)
        agents.on_delete.append(marketplace.drop_agent)
        publishing = MemoryPublishing(
            agents.has, self._threads.has, conversations.usage_of, marketplace.all
        )
        agents.on_delete.append(publishing.drop_agent)
        channels = MemoryChannels(agents.has, self._threads.has)
        agents.on_delete.append(channels.drop_agent)
        computers = MemoryComputers(agents.has)
        agents.on_delete.append(computers.drop_agent)
        plans = MemoryPlans()
        erasure = MemoryErasure(
            threads=self._threads,
            conversations=conversations,
            idempotency=idempotency,
            traces=traces,
            memories=memories,
            knowledge=knowledge,
            plans=plans,
            publishing=publishing,
            channels=channels,
            runners=runners,
        )
        super().__init__(
            Repositories(
                organizations=MemoryOrganizations(),
                api_keys=MemoryApiKeys(),
                agents=agents,
                threads=self._threads,
                conversations=conversations,
                mcps=mcps,
                secrets=secrets,
                integrations=MemoryIntegrations(),
                turn_reader=MemoryTurnReader(self._threads, agents, conversations, mcps, secrets),
                streams=conversations,
                idempotency=idempotency,
                traces=traces,
                analytics=traces,
                webhook_tools=MemoryWebhookTools(),
                plans=plans,
                memories=memories,
                knowledge=knowledge,
                runners=runners,
                projects=projects,
                marketplace=marketplace,
                publishing=publishing,
                skills=MemorySkills(),
                channels=channels,
                computers=computers,
                code_sessions=MemoryCodeSessions(),
                erasure=erasure,
                event_webhooks=MemoryEventWebhooks(self._threads.has),
            )
        )

    async def check_ready(self) -> None:
        """Memory is always ready: it lives as long as the process."""

    def _all_threads(self) -> Iterator[Thread]:
        return self._threads.all()
