"""Published chats and visitor threads in memory: the slug's uniqueness, the
agent's and the thread's existence are checked as PostgreSQL's unique index and
foreign keys do; the cost and the listing read the other stores through the
callables ``MemoryStorage`` hands over."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.marketplace import MarketplaceProfile
from agentsvc_core.entities.published_chat import ListedChat, PublishedChat, VisitorThread
from agentsvc_core.entities.usage import UsageRecord
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.publishing import PublishingStore

Exists = Callable[[str, UUID], bool]


def _matches(profile: MarketplaceProfile, q: str | None, category: str | None) -> bool:
    if category is not None and category not in profile.categories:
        return False
    if not q:
        return True
    words = q.lower()
    fields = (profile.display_name, profile.handle or "", profile.tagline, profile.description)
    return any(words in f.lower() for f in fields)


class MemoryPublishing(PublishingStore):
    def __init__(
        self,
        agent_exists: Exists,
        thread_exists: Exists,
        usage: Callable[[str, UUID], Iterable[UsageRecord]],
        profiles: Callable[[], Iterator[MarketplaceProfile]],
    ) -> None:
        self._agent_exists = agent_exists
        self._thread_exists = thread_exists
        self._usage = usage  # (org, thread) -> its usage records
        self._profiles = profiles
        self._chats: dict[tuple[str, UUID], PublishedChat] = {}
        self._visitors: dict[tuple[str, UUID], VisitorThread] = {}

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        self._chats.pop((org_id, agent_id), None)

    def drop_thread(self, org_id: str, thread_id: UUID) -> None:
        """A visitor thread's record goes with its thread."""
        self._visitors.pop((org_id, thread_id), None)

    def threads_of_visitor(self, org_id: str, visitor_id: str) -> list[VisitorThread]:
        found = [
            v
            for (org, _), v in self._visitors.items()
            if org == org_id and v.visitor_id == visitor_id
        ]
        return sorted(found, key=lambda v: (v.created_at, v.thread_id))

    def _check_slug(self, chat: PublishedChat) -> None:
        key = (chat.org_id, chat.agent_id)
        if any(c.slug == chat.slug and k != key for k, c in self._chats.items()):
            raise Conflict("the slug is taken", code="SLUG_TAKEN")

    async def add(self, chat: PublishedChat) -> PublishedChat:
        key = (chat.org_id, chat.agent_id)
        if not self._agent_exists(*key):
            raise NotFound("agent not found")
        if key in self._chats:
            raise Conflict("the agent is published already", code="ALREADY_PUBLISHED")
        self._check_slug(chat)
        self._chats[key] = chat
        return chat

    async def get(self, org_id: str, agent_id: UUID) -> PublishedChat | None:
        return self._chats.get((org_id, agent_id))

    async def of_agents(self, org_id: str, agent_ids: list[UUID]) -> dict[UUID, PublishedChat]:
        found = ((a, self._chats.get((org_id, a))) for a in agent_ids)
        return {a: c for a, c in found if c is not None}

    async def of_org(self, org_id: str) -> list[PublishedChat]:
        mine = [c for (org, _), c in self._chats.items() if org == org_id]
        return sorted(mine, key=lambda c: (c.created_at, c.agent_id))

    async def by_slug(self, slug: str) -> PublishedChat | None:
        return next((c for c in self._chats.values() if c.slug == slug), None)

    async def modify(
        self, org_id: str, agent_id: UUID, change: Callable[[PublishedChat], PublishedChat]
    ) -> PublishedChat:
        stored = self._chats.get((org_id, agent_id))
        if stored is None:
            raise NotFound("the agent is not published")
        updated = change(stored)
        self._check_slug(updated)
        self._chats[(org_id, agent_id)] = updated
        return updated

    async def delete(self, org_id: str, agent_id: UUID) -> bool:
        return self._chats.pop((org_id, agent_id), None) is not None

    async def add_visitor_thread(self, thread: VisitorThread) -> None:
        if not self._thread_exists(thread.org_id, thread.thread_id):
            raise NotFound("thread not found")
        self._visitors[(thread.org_id, thread.thread_id)] = thread

    async def visitor_thread(self, org_id: str, thread_id: UUID) -> VisitorThread | None:
        found = self._visitors.get((org_id, thread_id))
        if found is not None and not self._thread_exists(org_id, thread_id):
            return None  # PostgreSQL's cascade
        return found

    async def visitor_threads(
        self, org_id: str, agent_id: UUID, *, before: datetime | None, limit: int
    ) -> list[VisitorThread]:
        mine = [
            v
            for (org, thread_id), v in self._visitors.items()
            if org == org_id
            and v.agent_id == agent_id
            and self._thread_exists(org, thread_id)
            and (before is None or v.created_at < before)
        ]
        mine.sort(key=lambda v: (v.created_at, v.thread_id), reverse=True)
        return mine[:limit]

    async def visitor_cost(self, org_id: str, agent_id: UUID, since: datetime) -> float:
        total = 0.0
        for (org, thread_id), v in list(self._visitors.items()):
            if org != org_id or v.agent_id != agent_id:
                continue
            for record in self._usage(org, thread_id):
                if record.created_at >= since and record.cost_usd is not None:
                    total += record.cost_usd
        return total

    async def sealed_identities(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        rows = [
            (c.org_id, c.agent_id, sealed)
            for c in self._chats.values()
            if org_id is None or c.org_id == org_id
            for sealed in (c.identity_sealed, c.previous_sealed)
            if sealed is not None
        ]
        return sorted(rows)

    async def reseal(self, org_id: str, agent_id: UUID, old: str, new: str) -> bool:
        chat = self._chats.get((org_id, agent_id))
        if chat is None or old not in (chat.identity_sealed, chat.previous_sealed):
            return False
        self._chats[(org_id, agent_id)] = msgspec.structs.replace(
            chat,
            identity_sealed=new if chat.identity_sealed == old else chat.identity_sealed,
            previous_sealed=new if chat.previous_sealed == old else chat.previous_sealed,
        )
        return True

    async def listed(
        self, *, q: str | None, category: str | None, before: datetime | None, limit: int
    ) -> list[ListedChat]:
        rows: list[ListedChat] = []
        for profile in self._profiles():
            chat = self._chats.get((profile.org_id, profile.agent_id))
            if (
                chat is None
                or not profile.listed
                or not chat.is_active
                or chat.visibility != "public"
                or (before is not None and chat.created_at >= before)
                or not _matches(profile, q, category)
            ):
                continue
            rows.append(
                ListedChat(
                    agent_id=profile.agent_id,
                    slug=chat.slug,
                    handle=profile.handle,
                    display_name=profile.display_name,
                    tagline=profile.tagline,
                    description=profile.description,
                    categories=profile.categories,
                    capabilities=profile.capabilities,
                    avatar_sha256=profile.avatar.sha256 if profile.avatar else None,
                    published_at=chat.created_at,
                )
            )
        rows.sort(key=lambda r: (r.published_at, r.agent_id), reverse=True)
        return rows[:limit]
