"""Storage ports. Every call but the API-key lookup is scoped by organization.

Adapters raise only domain errors (``NotFound``...), never driver exceptions.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities import Agent, ApiKey, Organization


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

    async def list(self, org_id: str) -> list[Agent]:
        """Oldest first."""
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


class Storage(Protocol):
    """Everything the core stores, behind one object the composition root builds."""

    @property
    def organizations(self) -> OrganizationRepository: ...

    @property
    def api_keys(self) -> ApiKeyRepository: ...

    @property
    def agents(self) -> AgentRepository: ...
