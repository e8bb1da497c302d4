"""An agent's published chat, as its owner manages it: ``GET/POST/PATCH/DELETE
/api/agents/{id}/publish`` (docs/publishing.md).

POST publishes (one chat per agent), PATCH changes the fields it is given (and
rotates the identity secret when asked), DELETE unpublishes (the visitors'
threads stay, for the owner to read). The identity secret is made here, sealed
at once, and answered once: by the POST that made it, or the PATCH that rotated
it. Reads are open to the organization's members; every change is an admin's
(the web layer's access table)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

import msgspec
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.published_chat import (
    VISIBILITIES,
    PublishedChat,
    Visibility,
    VisitorThread,
)
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import AgentRepository, Clock, SecretBox
from agentsvc_core.ports.publishing import PublishingStore
from agentsvc_core.rules import check_embed_domain, check_text
from agentsvc_core.use_cases.publishing.identity import new_identity_secret
from agentsvc_core.use_cases.sealed import reseal_rows

__all__ = ["ChatChanges", "ChatDraft", "ChatView", "Publishing", "day_start", "identity_context"]

SLUG = re.compile(r"[a-z0-9-]{3,48}")
MAX_TITLE, MAX_DESCRIPTION, MAX_WELCOME = 120, 2000, 4000
MAX_PROMPTS, MAX_PROMPT = 8, 500
MAX_DOMAINS = 50
MAX_RATE = 600
MAX_CAP = 1_000_000.0
DEFAULT_RATE = 20
DEFAULT_CAP = 5.0

Slug = Annotated[str, Meta(pattern="^[a-z0-9-]{3,48}$", min_length=3, max_length=48)]
Prompts = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=MAX_PROMPT)]], Meta(max_length=MAX_PROMPTS)
]
Domains = Annotated[list[Annotated[str, Meta(max_length=253)]], Meta(max_length=MAX_DOMAINS)]
Rate = Annotated[int, Meta(ge=1, le=MAX_RATE)]
Cap = Annotated[float, Meta(ge=0, le=MAX_CAP)]


class ChatDraft(msgspec.Struct, frozen=True, kw_only=True):
    """A chat as POST publishes it; ``title`` empty: the agent's name.
    ``allowed_domains`` null: the organization's allowed embed domains.
    ``daily_cost_cap_usd`` null: no cap."""

    slug: Slug
    visibility: Visibility = "public"
    title: Annotated[str, Meta(max_length=MAX_TITLE)] = ""
    description: Annotated[str, Meta(max_length=MAX_DESCRIPTION)] = ""
    welcome_message: Annotated[str, Meta(max_length=MAX_WELCOME)] = ""
    starter_prompts: Prompts = []
    is_active: bool = True
    allowed_domains: Domains | None = None
    rate_limit_per_min: Rate = DEFAULT_RATE
    daily_cost_cap_usd: Cap | None = DEFAULT_CAP
    allow_user_grants: bool = False


class ChatChanges(msgspec.Struct, frozen=True, kw_only=True):
    """PATCH: the fields given change; ``rotate_identity_secret`` makes a new
    identity secret (the old one is accepted for another hour)."""

    slug: Slug | UnsetType = UNSET
    visibility: Visibility | UnsetType = UNSET
    title: Annotated[str, Meta(max_length=MAX_TITLE)] | UnsetType = UNSET
    description: Annotated[str, Meta(max_length=MAX_DESCRIPTION)] | UnsetType = UNSET
    welcome_message: Annotated[str, Meta(max_length=MAX_WELCOME)] | UnsetType = UNSET
    starter_prompts: Prompts | UnsetType = UNSET
    is_active: bool | UnsetType = UNSET
    allowed_domains: Domains | UnsetType | None = UNSET
    rate_limit_per_min: Rate | UnsetType = UNSET
    daily_cost_cap_usd: Cap | UnsetType | None = UNSET
    allow_user_grants: bool | UnsetType = UNSET
    rotate_identity_secret: bool = False


class ChatView(msgspec.Struct, frozen=True, kw_only=True):
    """A chat as its owner reads it: today's cost of its visitors' threads (since
    midnight UTC) and whether that reached the cap; ``identity_secret`` only in
    the answer that made it."""

    chat: PublishedChat
    cost_today_usd: float
    cap_reached: bool
    identity_secret: str | None = None


def identity_context(org_id: str, agent_id: UUID) -> str:
    """The sealed identity secret's associated data: it opens only in its own row."""
    return f"{org_id}:published_chat:{agent_id}"


def day_start(now: datetime) -> datetime:
    """Midnight UTC of ``now``'s day: where a chat's daily cost starts."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def cap_reached(chat: PublishedChat, cost: float) -> bool:
    return chat.daily_cost_cap_usd is not None and cost >= chat.daily_cost_cap_usd


def _strings(field: str, values: Sequence[str], most: int, longest: int) -> tuple[str, ...]:
    if len(values) > most:
        raise InvalidInput(field, f"at most {most}")
    return tuple(check_text(field, v, max_len=longest, required=True) for v in values)


def check_chat(chat: PublishedChat) -> PublishedChat:
    """The rules of a chat, whatever made it (the web schema publishes the same)."""
    if not SLUG.fullmatch(chat.slug):
        raise InvalidInput("slug", "must be 3-48 lowercase letters, digits or '-'")
    if chat.visibility not in VISIBILITIES:
        raise InvalidInput("visibility", "must be public, unlisted or private")
    check_text("title", chat.title, max_len=MAX_TITLE)
    check_text("description", chat.description, max_len=MAX_DESCRIPTION)
    check_text("welcome_message", chat.welcome_message, max_len=MAX_WELCOME)
    _strings("starter_prompts", chat.starter_prompts, MAX_PROMPTS, MAX_PROMPT)
    if chat.allowed_domains is not None:
        for d in _strings("allowed_domains", chat.allowed_domains, MAX_DOMAINS, 253):
            check_embed_domain("allowed_domains", d)
    if not 1 <= chat.rate_limit_per_min <= MAX_RATE:
        raise InvalidInput("rate_limit_per_min", f"must be between 1 and {MAX_RATE}")
    cap = chat.daily_cost_cap_usd
    if cap is not None and not 0 <= cap <= MAX_CAP:
        raise InvalidInput("daily_cost_cap_usd", f"must be between 0 and {MAX_CAP:g}")
    return chat


class Publishing:
    def __init__(
        self, store: PublishingStore, agents: AgentRepository, box: SecretBox, clock: Clock
    ) -> None:
        self._store = store
        self._agents = agents
        self._box = box
        self._clock = clock

    def _seal(self, org_id: str, agent_id: UUID, secret: str) -> str:
        return self._box.seal(secret.encode(), identity_context(org_id, agent_id))

    async def _view(self, chat: PublishedChat, secret: str | None = None) -> ChatView:
        cost = await self._store.visitor_cost(
            chat.org_id, chat.agent_id, day_start(self._clock.now())
        )
        return ChatView(
            chat=chat,
            cost_today_usd=cost,
            cap_reached=cap_reached(chat, cost),
            identity_secret=secret,
        )

    async def get(self, who: Principal, agent_id: UUID) -> ChatView:
        chat = await self._store.get(who.org_id, agent_id)
        if chat is None:
            await self._agents.get(who.org_id, agent_id)  # NotFound: no such agent
            raise NotFound("the agent is not published")
        return await self._view(chat)

    async def publish(self, who: Principal, agent_id: UUID, draft: ChatDraft) -> ChatView:
        agent = await self._agents.get(who.org_id, agent_id)
        now = self._clock.now()
        secret = new_identity_secret()
        fields = msgspec.structs.asdict(draft)
        chat = check_chat(
            PublishedChat(
                **{
                    **fields,
                    "title": draft.title or agent.name[:MAX_TITLE],
                    "starter_prompts": tuple(draft.starter_prompts),
                    "allowed_domains": None
                    if draft.allowed_domains is None
                    else tuple(draft.allowed_domains),
                },
                org_id=who.org_id,
                agent_id=agent_id,
                identity_sealed=self._seal(who.org_id, agent_id, secret),
                previous_sealed=None,
                rotated_at=None,
                created_at=now,
                updated_at=now,
            )
        )
        return await self._view(await self._store.add(chat), secret)

    async def update(self, who: Principal, agent_id: UUID, changes: ChatChanges) -> ChatView:
        now = self._clock.now()
        secret = new_identity_secret() if changes.rotate_identity_secret else None
        given = given_fields(changes, leave=("rotate_identity_secret",))
        for name in ("starter_prompts", "allowed_domains"):
            if given.get(name) is not None:
                given[name] = tuple(given[name])

        def change(chat: PublishedChat) -> PublishedChat:
            rotated = {}
            if secret is not None:
                rotated = {
                    "identity_sealed": self._seal(who.org_id, agent_id, secret),
                    "previous_sealed": chat.identity_sealed,
                    "rotated_at": now,
                }
            return check_chat(msgspec.structs.replace(chat, **given, **rotated, updated_at=now))

        try:
            chat = await self._store.modify(who.org_id, agent_id, change)
        except NotFound:
            await self._agents.get(who.org_id, agent_id)
            raise
        return await self._view(chat, secret)

    async def unpublish(self, who: Principal, agent_id: UUID) -> None:
        if not await self._store.delete(who.org_id, agent_id):
            await self._agents.get(who.org_id, agent_id)
            raise NotFound("the agent is not published")

    async def today(self, who: Principal, agent_id: UUID | None = None) -> list[ChatView]:
        """The organization's chats (or the agent's) with today's cost and whether
        it reached the cap: what analytics shows of them."""
        chats = await self._store.of_org(who.org_id)
        return [await self._view(c) for c in chats if agent_id is None or c.agent_id == agent_id]

    async def rotate_secrets(self, org_id: str | None = None) -> int:
        """Re-seal every identity secret with the newest key. Returns how many."""
        rows = await self._store.sealed_identities(org_id)
        return await reseal_rows(self._box, rows, identity_context, self._store.reseal)

    async def summaries(self, who: Principal, agent_ids: list[UUID]) -> dict[UUID, PublishedChat]:
        """The agents' chats (an agent's ``published_chats``)."""
        return await self._store.of_agents(who.org_id, agent_ids)

    async def visitor_threads(
        self, who: Principal, agent_id: UUID, *, before: datetime | None, limit: int
    ) -> tuple[list[VisitorThread], datetime | None]:
        """The agent's visitor threads, newest first, by pages (the next cursor)."""
        await self._agents.get(who.org_id, agent_id)
        rows = await self._store.visitor_threads(
            who.org_id, agent_id, before=before, limit=limit + 1
        )
        page = rows[:limit]
        return page, page[-1].created_at if len(rows) > limit else None
