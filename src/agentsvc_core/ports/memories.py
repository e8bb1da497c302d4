"""Storage of memories (``Storage.memories``; docs/memory.md).

Every call is scoped by organization; another organization's memory is
``NotFound``. ``save`` and ``edit`` are atomic for their agent: two of them for one
agent run one after the other (an advisory lock in PostgreSQL; the event loop in
memory), so the identical-fact check, the supersede by key and the cap cannot
interleave. Adapters
raise what storage raises (``NotFound``, ``StorageError``, ``Unavailable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.memory import Memory, MemoryScope, MemoryStatus

__all__ = ["MemoryStore", "Saved", "ScopeFilter"]

# (scope, scope id): a scope id of None matches every id of that scope
ScopeFilter = tuple[MemoryScope, str | None]


class Saved(msgspec.Struct, frozen=True, kw_only=True):
    """What ``save`` did: ``saved`` (``memory`` is the new one; ``superseded`` the
    id of the active memory of the same key it replaced, if any), ``existing`` (an
    active identical fact was there: ``memory`` is that one, nothing changed) or
    ``full`` (the agent has ``max_active`` active memories: nothing stored)."""

    outcome: Literal["saved", "existing", "full"]
    memory: Memory | None = None
    superseded: UUID | None = None


class MemoryStore(Protocol):
    async def save(self, memory: Memory, max_active: int) -> Saved:
        """Store a new active memory of an existing agent, unless an active memory
        of the same agent, scope and scope id has the same ``fingerprint`` (then
        ``existing``). An active memory of the same agent, scope, scope id and
        ``key`` becomes ``superseded`` by it. Refused (``full``) when the agent's
        active memories, less the one superseded, number ``max_active`` or more.
        Raises ``NotFound`` when the agent is gone."""
        ...

    async def edit(
        self, org_id: str, agent_id: UUID, memory_id: UUID, content: str, now: datetime
    ) -> Saved:
        """Give a memory new ``content`` (and ``updated_at`` ``now``), searched by its
        new words from then on: ``saved`` (``memory`` as changed), or ``existing``
        when it is active and another active memory of its agent, scope and scope id
        has the same ``fingerprint`` (``memory`` is that one; nothing changed). Atomic
        with ``save`` for the agent. Raises ``NotFound`` (also for another agent's
        memory)."""
        ...

    async def get(self, org_id: str, agent_id: UUID, memory_id: UUID) -> Memory:
        """Raises ``NotFound`` (also for another agent's memory)."""
        ...

    async def page(
        self,
        org_id: str,
        agent_id: UUID,
        *,
        scopes: Sequence[ScopeFilter] | None,
        status: MemoryStatus | None,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[Memory]:
        """The agent's memories newest first (``created_at``, then id, both
        descending), those strictly before ``before`` in that order, within any
        of ``scopes`` (as ``search``'s)."""
        ...

    async def search(
        self,
        org_id: str,
        agent_id: UUID,
        terms: Sequence[str],
        scopes: Sequence[ScopeFilter] | None,
        limit: int,
    ) -> list[tuple[Memory, float]]:
        """Active memories whose key or content has any of ``terms`` (lowercase
        words), best first (a score > 0; ties newest first), within any of
        ``scopes`` (``None``: every scope; an empty sequence: none)."""
        ...

    async def delete(self, org_id: str, agent_id: UUID, memory_id: UUID) -> None:
        """Raises ``NotFound``."""
        ...
