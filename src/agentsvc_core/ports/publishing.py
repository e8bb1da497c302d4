"""Storage of published chats and their visitors' threads (``Storage.publishing``).

One chat per agent, scoped by organization; a chat goes when its agent goes.
``slug`` is unique across the service (``Conflict`` with code ``SLUG_TAKEN``
when another agent's chat has it). ``by_slug`` is the public routes' one read,
whatever the organization. A visitor thread goes when its thread goes. Adapters
raise what storage raises (``NotFound``, ``StorageError``, ``Unavailable``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities.published_chat import ListedChat, PublishedChat, VisitorThread

__all__ = ["PublishingStore"]


class PublishingStore(Protocol):
    async def add(self, chat: PublishedChat) -> PublishedChat:
        """Store a new chat. Raises ``NotFound`` when the agent is gone, ``Conflict``
        (``SLUG_TAKEN``) when the slug is taken, ``Conflict`` (``ALREADY_PUBLISHED``)
        when the agent has a chat."""
        ...

    async def get(self, org_id: str, agent_id: UUID) -> PublishedChat | None:
        """The agent's chat, or None."""
        ...

    async def of_agents(self, org_id: str, agent_ids: list[UUID]) -> dict[UUID, PublishedChat]:
        """The chats of those agents that have one."""
        ...

    async def of_org(self, org_id: str) -> list[PublishedChat]:
        """The organization's chats, oldest first."""
        ...

    async def by_slug(self, slug: str) -> PublishedChat | None:
        """The chat of that slug, whatever its organization, or None."""
        ...

    async def modify(
        self, org_id: str, agent_id: UUID, change: Callable[[PublishedChat], PublishedChat]
    ) -> PublishedChat:
        """Atomic read-change-write. Raises ``NotFound`` (no chat), ``Conflict``
        (``SLUG_TAKEN``)."""
        ...

    async def delete(self, org_id: str, agent_id: UUID) -> bool:
        """Delete the agent's chat (its visitors' threads stay); False when none."""
        ...

    async def add_visitor_thread(self, thread: VisitorThread) -> None:
        """Record a visitor's thread (its thread is stored). Raises ``NotFound`` when
        the thread is gone."""
        ...

    async def visitor_thread(self, org_id: str, thread_id: UUID) -> VisitorThread | None: ...

    async def visitor_threads(
        self, org_id: str, agent_id: UUID, *, before: datetime | None, limit: int
    ) -> list[VisitorThread]:
        """The agent's visitor threads, newest first, those created before ``before``."""
        ...

    async def visitor_cost(self, org_id: str, agent_id: UUID, since: datetime) -> float:
        """The known cost (USD) of the model calls made since ``since`` in the
        agent's visitor threads (usage records without a price count 0)."""
        ...

    async def sealed_identities(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        """(organization, agent, sealed value) of every sealed identity secret, the
        current and the previous ones (of one organization, or of all): the
        key-rotation command re-seals them."""
        ...

    async def reseal(self, org_id: str, agent_id: UUID, old: str, new: str) -> bool:
        """Put ``new`` where the chat's current or previous sealed secret is ``old``
        (compare and set); False when neither is ``old`` any more."""
        ...

    async def listed(
        self, *, q: str | None, category: str | None, before: datetime | None, limit: int
    ) -> list[ListedChat]:
        """The marketplace's public listing: agents whose profile is ``listed`` and
        whose chat is active and ``public``, newest chat first, those published
        before ``before``; ``q`` matches the name, handle, tagline or description
        (case-insensitive substring), ``category`` one of the categories."""
        ...
