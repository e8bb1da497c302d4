"""Storage ports. Every call but the API-key lookup is scoped by organization.

Adapters raise only domain errors (``NotFound``...), never driver exceptions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import (
    Agent,
    ApiKey,
    McpAttachment,
    McpServer,
    Message,
    Organization,
    Participant,
    Run,
    Thread,
    TraceRecord,
    UsageRecord,
)
from agentsvc_core.ports.channels import ChannelStore
from agentsvc_core.ports.code_sessions import CodeSessionStore
from agentsvc_core.ports.computer import ComputerStore
from agentsvc_core.ports.erasure import ErasureStore
from agentsvc_core.ports.event_webhooks import EventWebhookStore
from agentsvc_core.ports.idempotency import IdempotencyClaim, IdempotencyStore
from agentsvc_core.ports.integrations import IntegrationStore
from agentsvc_core.ports.knowledge import KnowledgeStore
from agentsvc_core.ports.marketplace import MarketplaceStore
from agentsvc_core.ports.memories import MemoryStore
from agentsvc_core.ports.plans import PlanStore
from agentsvc_core.ports.projects import ProjectStore
from agentsvc_core.ports.publishing import PublishingStore
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.sealed import SealedRecord, SecretStore
from agentsvc_core.ports.skills import SkillStore
from agentsvc_core.ports.streams import EventBatch, StreamStore
from agentsvc_core.ports.traces import AnalyticsStore, TraceStore
from agentsvc_core.ports.webhooks import WebhookToolStore


class OrganizationRepository(Protocol):
    async def ensure(self, org: Organization) -> Organization:
        """Create the organization unless it exists; return the stored one. Idempotent
        and safe under concurrent callers."""
        ...

    async def get(self, org_id: str) -> Organization:
        """Raises ``NotFound``."""
        ...


class ApiKeyRepository(Protocol):
    async def add(self, key: ApiKey) -> None:
        """Store a new key (its organization exists). A key whose hash is already
        stored is left as it is (the bootstrap key is ensured on every start)."""
        ...

    async def find_by_hash(self, key_hash: str) -> ApiKey | None:
        """The one lookup not scoped by organization: the key is what names it."""
        ...

    async def list(self, org_id: str) -> list[ApiKey]:
        """The organization's keys, revoked ones included, oldest first."""
        ...

    async def revoke(self, org_id: str, key_id: UUID, at: datetime) -> ApiKey:
        """Mark the key revoked at ``at`` and return it. Idempotent: an already
        revoked key keeps its first revocation time. Raises ``NotFound``."""
        ...


class AgentRepository(Protocol):
    async def add(self, agent: Agent) -> None: ...

    async def get(self, org_id: str, agent_id: UUID) -> Agent:
        """Raises ``NotFound`` (also for another organization's agent)."""
        ...

    async def list(self, org_id: str, *, project_id: UUID | None = None) -> list[Agent]:
        """Oldest first; with ``project_id``, only that project's."""
        ...

    async def modify(self, org_id: str, agent_id: UUID, change: Callable[[Agent], Agent]) -> Agent:
        """Apply ``change`` to the current agent and store the result atomically:
        concurrent modifications of one agent are serialised, none is lost.
        Whatever ``change`` raises propagates and nothing is stored. Raises
        ``NotFound``."""
        ...

    async def delete(self, org_id: str, agent_id: UUID) -> None:
        """Raises ``NotFound``. Threads of the agent are kept."""
        ...


class ThreadRepository(Protocol):
    async def add(self, thread: Thread) -> Thread:
        """Store a new thread. ``created_at`` is kept distinct within the
        organization (bumped by a microsecond on a collision), so a cursor on it
        pages exactly; the stored thread is returned."""
        ...

    async def get(self, org_id: str, thread_id: UUID) -> Thread:
        """With its ``active_run_id`` (the running run's id), as ``modify`` and
        ``list_for_agent`` return them. Raises ``NotFound``."""
        ...

    async def modify(
        self, org_id: str, thread_id: UUID, change: Callable[[Thread], Thread]
    ) -> Thread:
        """Atomic read-change-write, as ``AgentRepository.modify``."""
        ...

    async def list_for_agent(
        self,
        org_id: str,
        agent_id: UUID,
        *,
        before: datetime | None,
        limit: int,
        visible_to: str | None = None,
        words: Sequence[str] = (),
    ) -> list[Thread]:
        """Newest first, strictly older than ``before``. With ``visible_to``, only
        the threads that user opened or takes part in. With ``words`` (lowercase,
        letters and digits only: ``use_cases.threads.search_words``), only the threads
        whose title, or one of whose shown messages (``visible_in_history``; its first
        ``SEARCH_CHARS`` characters), holds every one of them as the start of one of
        its words, a word being a run of letters and digits, compared lowercased."""
        ...

    async def put_participant(self, participant: Participant) -> Participant:
        """Add, or update the role and display name of, a participant."""
        ...

    async def participants(self, org_id: str, thread_id: UUID) -> list[Participant]:
        """In the order they were added."""
        ...

    async def participant(
        self, org_id: str, thread_id: UUID, user_id: str
    ) -> Participant | None: ...

    async def remove_participant(self, org_id: str, thread_id: UUID, user_id: str) -> bool:
        """True when there was one to remove."""
        ...


class ConversationStore(Protocol):
    """Messages, runs (replies) and usage records: the turn's storage, shaped so a
    turn costs two writes: one to begin, one to finish."""

    async def begin_turn(
        self,
        run: Run,
        new: list[Message],
        stale_before: datetime,
        seen: int | None = None,
        claim: IdempotencyClaim | None = None,
        *,
        head: UUID | None = None,
    ) -> list[Message] | None:
        """Atomically: refuse with ``Conflict(code="THREAD_BUSY")`` when the
        thread has a running run whose heartbeat is newer than ``stale_before``
        (an older one is marked ``interrupted``); store ``run`` and the ``new``
        messages; with ``head``, make it the thread's ``head_id`` (a thread with
        branches: use_cases/branches.py).

        ``seen`` is the ``history_mark`` of a ``turn_inputs`` read: when no message
        was added to the thread since that read, return ``None`` (the history is
        what was read, then ``new``). Otherwise, and without ``seen``, return the
        thread's whole history (all roles, oldest first, ``new`` last).

        ``claim``: the send's idempotency key, claimed for ``run`` in the same
        write; ``IdempotencyKeyInUse`` (and nothing stored) when the key is held
        (``IdempotencyStore``)."""
        ...

    async def add_message(self, message: Message) -> None:
        """Store a message outside a turn, after the thread's others (a message
        posted to a multiplayer thread that does not call the agent), even while a
        reply runs (its thread exists)."""
        ...

    async def heartbeat(self, runs: list[tuple[str, UUID]], at: datetime) -> None:
        """Refresh the heartbeat of these (organization, run id) runs that are still
        running: one write for every reply a process runs."""
        ...

    async def finish_turn(
        self,
        run: Run,
        new: list[Message],
        usage: list[UsageRecord],
        events: EventBatch | None = None,
        trace: TraceRecord | None = None,
        *,
        head: UUID | None = None,
    ) -> None:
        """Atomically: store the run's final state, its messages (and ``head`` as
        the thread's ``head_id``, as ``begin_turn`` does), its usage records,
        the last batch of its events (``StreamStore``: the ones not yet stored, its
        final ``done`` or ``error`` event last) and its trace (``TraceStore``; a
        trace id stored already, as when a client sends one ``traceparent`` with
        several turns, gets this turn's spans and totals added)."""
        ...

    async def running(self, org_id: str, thread_id: UUID, stale_before: datetime) -> Run | None:
        """The thread's running run, unless its heartbeat is older than ``stale_before``."""
        ...

    async def latest_run(self, org_id: str, thread_id: UUID) -> Run | None: ...

    async def interrupt_orphaned(self, org_id: str, run_id: UUID, at: datetime) -> bool:
        """Mark the run ``interrupted`` (finished ``at``) if it is running and the
        process that began it is gone, whatever its heartbeat says; True when it did.
        The run's messages stay as they are. A run of a live process, or of a
        process the store cannot tell about, is left alone."""
        ...

    async def interrupt_stale(self, stale_before: datetime, at: datetime) -> int:
        """Mark every running run whose heartbeat is older than ``stale_before``,
        or whose process is gone (as ``interrupt_orphaned``), as ``interrupted``
        (all organizations: a maintenance sweep). Returns how many."""
        ...

    async def history(
        self, org_id: str, thread_id: UUID, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        """The messages ``visible_in_history`` (entities), oldest first, and how many
        there are."""
        ...

    async def thread_messages(self, org_id: str, thread_id: UUID) -> list[Message]:
        """Every message of the thread, all roles and branches, in the order stored
        (a thread with branches: use_cases/branches.py walks them)."""
        ...

    async def copy_messages(
        self, org_id: str, from_thread: UUID, ids: list[UUID], to_thread: UUID
    ) -> int:
        """Copy the messages of ``from_thread`` named by ``ids`` into ``to_thread``
        (a fork), in the order stored, as one line: each a new id, no ``parent_id``
        and no ``run_id``, everything else kept. Returns how many were copied."""
        ...

    async def usage(self, org_id: str, thread_id: UUID) -> list[UsageRecord]:
        """The thread's usage records, oldest first."""
        ...

    async def run_messages(self, org_id: str, thread_id: UUID, run_id: UUID) -> list[Message]:
        """The messages a run stored (the user's it answered and its own), oldest
        first, among the thread's latest ``RUN_MESSAGES_WINDOW`` (a bounded read
        whatever the thread's length; what runs after a turn reads it soon after)."""
        ...

    async def add_usage(self, records: list[UsageRecord]) -> None:
        """Store usage records of model calls made outside a turn's reply (after
        it: memory collection)."""
        ...


RUN_MESSAGES_WINDOW = 500
SEARCH_CHARS = 100_000  # how much of a message the thread search reads
SEARCH_WORD = re.compile(r"[^\W_]+")
"""A word of the thread search: letters and digits (PostgreSQL's parser splits at
``_`` too)."""


class TurnInputs(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a turn reads before it starts, read together."""

    thread: Thread  # as stored (no ``active_run_id``: ``latest_run`` says it)
    agent: Agent | None  # None: the thread's agent has been deleted
    latest_run: Run | None  # the thread's most recent run
    mcp: list[tuple[McpAttachment, McpServer]]  # the agent's MCP servers, oldest first
    records: dict[str, SealedRecord]  # the agent's sealed records (key = agent id), by kind
    history: list[Message]  # the thread's messages, all roles, oldest first
    history_mark: int  # names this read of the history, for ``begin_turn(seen=...)``


class TurnReader(Protocol):
    """The turn's reads in one storage round trip (the hot path)."""

    async def turn_inputs(self, org_id: str, thread_id: UUID, kinds: list[str]) -> TurnInputs:
        """The thread, its agent, its latest run, the agent's MCP attachments with
        their servers, the agent's sealed records of the given ``kinds`` and the
        thread's history.
        Raises ``NotFound`` when the thread does not exist."""
        ...


class McpRepository(Protocol):
    async def add(self, server: McpServer) -> McpServer:
        """Store a new server. Its slug is made unique within the organization
        (``-2``, ``-3``... appended on a collision); the stored server is returned."""
        ...

    async def get(self, org_id: str, mcp_id: UUID) -> McpServer:
        """Raises ``NotFound``."""
        ...

    async def list_all(self, org_id: str) -> list[McpServer]:
        """Oldest first."""
        ...

    async def modify(
        self, org_id: str, mcp_id: UUID, change: Callable[[McpServer], McpServer]
    ) -> McpServer:
        """Atomic read-change-write; a changed slug is made unique as in ``add``."""
        ...

    async def delete(self, org_id: str, mcp_id: UUID) -> None:
        """Remove the server and every agent and runner attachment of it.
        Raises ``NotFound``."""
        ...

    async def attach(self, attachment: McpAttachment) -> McpAttachment:
        """Attach (or change the allowed tools of an existing attachment)."""
        ...

    async def detach(self, org_id: str, owner_kind: str, owner_id: UUID, mcp_id: UUID) -> bool: ...

    async def attachments(
        self, org_id: str, owner_kind: str, owner_id: UUID
    ) -> list[McpAttachment]:
        """Oldest first."""
        ...

    async def sealed_credentials(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        """(org, id, sealed) of every server with credentials, all organizations
        when ``org_id`` is None (the key-rotation command)."""
        ...

    async def reseal(self, org_id: str, mcp_id: UUID, old: str, new: str) -> bool:
        """Replace the sealed credentials if they are still ``old``."""
        ...


class Storage(Protocol):
    """Everything the core stores, behind one object the composition root builds."""

    @property
    def organizations(self) -> OrganizationRepository: ...

    @property
    def api_keys(self) -> ApiKeyRepository: ...

    @property
    def agents(self) -> AgentRepository: ...

    @property
    def threads(self) -> ThreadRepository: ...

    @property
    def conversations(self) -> ConversationStore: ...

    @property
    def mcps(self) -> McpRepository: ...

    @property
    def secrets(self) -> SecretStore: ...

    @property
    def integrations(self) -> IntegrationStore: ...

    @property
    def turn_reader(self) -> TurnReader: ...

    @property
    def streams(self) -> StreamStore: ...

    @property
    def idempotency(self) -> IdempotencyStore: ...

    @property
    def traces(self) -> TraceStore: ...

    @property
    def analytics(self) -> AnalyticsStore: ...

    @property
    def webhook_tools(self) -> WebhookToolStore: ...

    @property
    def plans(self) -> PlanStore: ...

    @property
    def memories(self) -> MemoryStore: ...

    @property
    def knowledge(self) -> KnowledgeStore: ...

    @property
    def runners(self) -> RunnerStore: ...

    @property
    def projects(self) -> ProjectStore: ...

    @property
    def marketplace(self) -> MarketplaceStore: ...

    @property
    def publishing(self) -> PublishingStore: ...

    @property
    def skills(self) -> SkillStore: ...

    @property
    def channels(self) -> ChannelStore: ...

    @property
    def computers(self) -> ComputerStore: ...

    @property
    def code_sessions(self) -> CodeSessionStore: ...

    @property
    def erasure(self) -> ErasureStore: ...

    @property
    def event_webhooks(self) -> EventWebhookStore: ...

    async def check_ready(self) -> None:
        """Whether storage can serve now (the ``/readyz`` probe): returns when it
        can, raises ``Unavailable`` with a short reason (no secret, no driver
        message) when it cannot: unreachable, no free connection within a few
        seconds, or a schema with migrations not applied. At most one round trip;
        raises nothing else."""
        ...
