"""Request bodies and answers of the published chats' routes: the owner's
(``/api/agents/{id}/publish``) and the visitors' (``/api/public/chat/{slug}``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

import msgspec
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import Message
from agentsvc_core.entities.published_chat import ListedChat, PublishedChat, VisitorThread
from agentsvc_core.use_cases.publishing import ChatChanges, ChatDraft, ChatView, PublicFace
from agentsvc_core.use_cases.publishing.visitors import MAX_VISITOR_CONTENT, Session
from agentsvc_web.drafts import camel_body
from agentsvc_web.schemas import copied

__all__ = [
    "ChatOut",
    "ChatPatchBody",
    "ListedOut",
    "MarketplacePageOut",
    "PublicFaceOut",
    "PublishBody",
    "SessionBody",
    "SessionOut",
    "VisitorMessageBody",
    "VisitorMessageListOut",
    "VisitorMessageOut",
    "VisitorThreadBody",
    "VisitorThreadCreatedOut",
    "VisitorThreadListOut",
    "VisitorThreadOut",
    "chat_refs",
]

if TYPE_CHECKING:  # the drafts' own shape, in camelCase on the wire
    PublishBody = ChatDraft
    ChatPatchBody = ChatChanges
else:
    PublishBody = camel_body(ChatDraft, "PublishBody", __name__)
    ChatPatchBody = camel_body(ChatChanges, "ChatPatchBody", __name__)


class ChatOut(msgspec.Struct, omit_defaults=True):
    """The owner's view of the agent's published chat. ``identity_secret`` is in the
    answer that made it only (publishing, a rotation): it is shown once."""

    agent_id: UUID
    slug: str
    url: str  # the hosted page
    visibility: str
    title: str
    description: str
    welcome_message: str
    starter_prompts: list[str]
    is_active: bool
    allowed_domains: list[str] | None  # null: the organization's embed domains
    rate_limit_per_min: int
    daily_cost_cap_usd: float | None
    allow_user_grants: bool
    cost_today_usd: float
    cap_reached: bool
    identity_secret_rotated_at: datetime | None
    created_at: datetime
    updated_at: datetime
    identity_secret: str | UnsetType = UNSET

    @classmethod
    def of(cls, view: ChatView) -> ChatOut:
        c = view.chat
        return copied(
            cls,
            c,
            url=f"/c/{c.slug}",
            starter_prompts=list(c.starter_prompts),
            allowed_domains=None if c.allowed_domains is None else list(c.allowed_domains),
            cost_today_usd=round(view.cost_today_usd, 6),
            cap_reached=view.cap_reached,
            identity_secret_rotated_at=c.rotated_at,
            identity_secret=UNSET if view.identity_secret is None else view.identity_secret,
        )


def chat_refs(chats: Mapping[UUID, PublishedChat], agent_id: UUID) -> list[dict[str, Any]]:
    """An agent's ``published_chats``: ``[{slug, is_active}]``, empty when unpublished."""
    chat = chats.get(agent_id)
    return [] if chat is None else [{"slug": chat.slug, "is_active": chat.is_active}]


class VisitorThreadOut(msgspec.Struct):
    """A thread a visitor opened through the agent's published chat: read it (its
    messages, usage and traces) with the thread routes by its id."""

    thread_id: UUID
    kind: str  # always "visitor"
    visitor_id: str
    identified: bool  # the customer's server signed the visitor's id
    created_at: datetime

    @classmethod
    def of(cls, v: VisitorThread) -> VisitorThreadOut:
        return copied(cls, v, kind="visitor")


class VisitorThreadListOut(msgspec.Struct, rename="camel"):
    threads: list[VisitorThreadOut]
    next_cursor: str | None


# --- the visitors' ------------------------------------------------------------------


class PublicFaceOut(msgspec.Struct):
    slug: str
    title: str
    description: str
    welcome_message: str
    starter_prompts: list[str]
    identity_required: bool  # private: a session needs the site's signed identity

    @classmethod
    def of(cls, face: PublicFace) -> PublicFaceOut:
        return copied(cls, face, starter_prompts=list(face.starter_prompts))


class SessionBody(msgspec.Struct, rename="camel"):
    """Empty for an anonymous visitor; the three fields together for a visitor the
    customer's server signed (docs/publishing.md)."""

    visitor_id: Annotated[str, Meta(min_length=1, max_length=128)] | None = None
    expires_at: Annotated[int, Meta(ge=0, le=2**40)] | None = None
    signature: Annotated[str, Meta(max_length=128)] | None = None


class SessionOut(msgspec.Struct):
    token: str  # the visitor token: Authorization: Bearer vt_...
    visitor_id: str
    identified: bool
    expires_at: datetime

    @classmethod
    def of(cls, s: Session) -> SessionOut:
        return copied(cls, s)


class VisitorThreadBody(msgspec.Struct, rename="camel"):
    title: Annotated[str, Meta(max_length=200)] | None = None


class VisitorThreadCreatedOut(msgspec.Struct):
    id: UUID
    title: str | None
    created_at: datetime


class VisitorMessageBody(msgspec.Struct, rename="camel"):
    content: Annotated[str, Meta(min_length=1, max_length=MAX_VISITOR_CONTENT)]


class VisitorMessageOut(msgspec.Struct):
    id: UUID
    role: str
    content: str
    created_at: datetime

    @classmethod
    def of(cls, m: Message) -> VisitorMessageOut:
        return copied(cls, m)


class VisitorMessageListOut(msgspec.Struct):
    messages: list[VisitorMessageOut]
    total: int


# --- the public marketplace -------------------------------------------------------


class ListedOut(msgspec.Struct):
    """A listed agent: its public profile and its chat's slug."""

    agent_id: UUID
    slug: str
    chat_url: str
    handle: str | None
    display_name: str
    tagline: str
    description: str
    categories: list[str]
    capabilities: list[str]
    avatar_url: str | None
    published_at: datetime

    @classmethod
    def of(cls, row: ListedChat) -> ListedOut:
        return copied(
            cls,
            row,
            chat_url=f"/c/{row.slug}",
            categories=list(row.categories),
            capabilities=list(row.capabilities),
            avatar_url=None
            if row.avatar_sha256 is None
            else f"/api/public/avatars/{row.agent_id}/{row.avatar_sha256}",
        )


class MarketplacePageOut(msgspec.Struct, rename="camel"):
    agents: list[ListedOut]
    next_cursor: str | None
