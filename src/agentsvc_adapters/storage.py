"""What the two storage adapters (memory, postgres) share: the ``Storage`` port's
accessors, written once. An adapter builds its repositories, names them in a
``Repositories`` and hands that to ``StorageFacade``; it adds ``check_ready`` and
whatever its own life needs (a pool to open and close). Imports no adapter, so
memory and postgres stay independent of each other."""

from __future__ import annotations

from dataclasses import dataclass

from agentsvc_core.ports import (
    AgentRepository,
    AnalyticsStore,
    ApiKeyRepository,
    ConversationStore,
    IntegrationStore,
    McpRepository,
    OrganizationRepository,
    SecretStore,
    Storage,
    StreamStore,
    ThreadRepository,
    TraceStore,
    TurnReader,
    WebhookToolStore,
)
from agentsvc_core.ports.channels import ChannelStore
from agentsvc_core.ports.code_sessions import CodeSessionStore
from agentsvc_core.ports.computer import ComputerStore
from agentsvc_core.ports.erasure import ErasureStore
from agentsvc_core.ports.event_webhooks import EventWebhookStore
from agentsvc_core.ports.idempotency import IdempotencyStore
from agentsvc_core.ports.knowledge import KnowledgeStore
from agentsvc_core.ports.marketplace import MarketplaceStore
from agentsvc_core.ports.memories import MemoryStore
from agentsvc_core.ports.plans import PlanStore
from agentsvc_core.ports.projects import ProjectStore
from agentsvc_core.ports.publishing import PublishingStore
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.skills import SkillStore

__all__ = ["Repositories", "StorageFacade"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Repositories:
    """Every repository of a ``Storage``, by the name the port gives it (one object
    may serve two: memory's conversations are its streams too)."""

    organizations: OrganizationRepository
    api_keys: ApiKeyRepository
    agents: AgentRepository
    threads: ThreadRepository
    conversations: ConversationStore
    mcps: McpRepository
    secrets: SecretStore
    integrations: IntegrationStore
    turn_reader: TurnReader
    streams: StreamStore
    idempotency: IdempotencyStore
    traces: TraceStore
    analytics: AnalyticsStore
    webhook_tools: WebhookToolStore
    plans: PlanStore
    memories: MemoryStore
    knowledge: KnowledgeStore
    runners: RunnerStore
    projects: ProjectStore
    marketplace: MarketplaceStore
    publishing: PublishingStore
    skills: SkillStore
    channels: ChannelStore
    computers: ComputerStore
    code_sessions: CodeSessionStore
    erasure: ErasureStore
    event_webhooks: EventWebhookStore


class StorageFacade(Storage):
    """The port's accessors over the adapter's ``Repositories``; the adapter still
    says whether it is ready (``check_ready``)."""

    def __init__(self, repositories: Repositories) -> None:
        self._repositories = repositories

    @property
    def organizations(self) -> OrganizationRepository:
        return self._repositories.organizations

    @property
    def api_keys(self) -> ApiKeyRepository:
        return self._repositories.api_keys

    @property
    def agents(self) -> AgentRepository:
        return self._repositories.agents

    @property
    def threads(self) -> ThreadRepository:
        return self._repositories.threads

    @property
    def conversations(self) -> ConversationStore:
        return self._repositories.conversations

    @property
    def mcps(self) -> McpRepository:
        return self._repositories.mcps

    @property
    def secrets(self) -> SecretStore:
        return self._repositories.secrets

    @property
    def integrations(self) -> IntegrationStore:
        return self._repositories.integrations

    @property
    def turn_reader(self) -> TurnReader:
        return self._repositories.turn_reader

    @property
    def streams(self) -> StreamStore:
        return self._repositories.streams

    @property
    def idempotency(self) -> IdempotencyStore:
        return self._repositories.idempotency

    @property
    def traces(self) -> TraceStore:
        return self._repositories.traces

    @property
    def analytics(self) -> AnalyticsStore:
        return self._repositories.analytics

    @property
    def webhook_tools(self) -> WebhookToolStore:
        return self._repositories.webhook_tools

    @property
    def plans(self) -> PlanStore:
        return self._repositories.plans

    @property
    def memories(self) -> MemoryStore:
        return self._repositories.memories

    @property
    def knowledge(self) -> KnowledgeStore:
        return self._repositories.knowledge

    @property
    def runners(self) -> RunnerStore:
        return self._repositories.runners

    @property
    def projects(self) -> ProjectStore:
        return self._repositories.projects

    @property
    def marketplace(self) -> MarketplaceStore:
        return self._repositories.marketplace

    @property
    def publishing(self) -> PublishingStore:
        return self._repositories.publishing

    @property
    def skills(self) -> SkillStore:
        return self._repositories.skills

    @property
    def channels(self) -> ChannelStore:
        return self._repositories.channels

    @property
    def computers(self) -> ComputerStore:
        return self._repositories.computers

    @property
    def code_sessions(self) -> CodeSessionStore:
        return self._repositories.code_sessions

    @property
    def erasure(self) -> ErasureStore:
        return self._repositories.erasure

    @property
    def event_webhooks(self) -> EventWebhookStore:
        return self._repositories.event_webhooks
