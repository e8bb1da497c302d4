"""A published chat as its visitors use it: ``/api/public/chat/{slug}/...``
(docs/publishing.md).

A visitor is a principal of its own. Starting a session gives it a visitor token
(sealed by the service's ``SecretBox``: it names the chat's organization and
agent, the visitor, whether the customer's server signed that id, and when it
expires), and the token can do exactly this: read the chat's public face, open
threads with the chat's agent, and send to, stop and read those threads. A
thread another visitor opened, or any other thread, is ``NotFound``, as an
unknown one is. A private chat admits only visitors whose id the customer's
server signed (``identity.signed_by``).

A visitor's turn runs as the organization acting for the visitor, with no user
(``Principal.for_visitor``), after the checks here, so it uses no grant: no OAuth
token for an MCP server (neither a user's nor the organization's) and no
authorization started, and the credential resolver is asked for the organization
(an empty user id), unless the owner turned ``allow_user_grants`` on, when a signed
visitor's id is the user the resolver is asked for. A visitor sends text only:
no client tools, model, profile or prompt of its own. Nothing here is on the
private API's path: an ordinary turn costs what it did."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Principal, Thread
from agentsvc_core.entities.published_chat import PublishedChat, VisitorThread
from agentsvc_core.errors import (
    NotFound,
    RateLimited,
    Unauthenticated,
)
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.publishing import PublishingStore
from agentsvc_core.ports.secrets import SecretUnreadable
from agentsvc_core.rules import check_text
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.publishing.chats import cap_reached, day_start, identity_context
from agentsvc_core.use_cases.publishing.identity import (
    accepted_secrets,
    new_visitor_id,
    signed_by,
)
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn.conversation import Conversation, SendInput
from agentsvc_core.use_cases.turn.events import Turn

__all__ = ["Identity", "PublicChats", "PublicFace", "Session", "Visitor"]

TOKEN_PREFIX = "vt_"  # noqa: S105 (a prefix, no secret)
TOKEN_CONTEXT = "published_chat:visitor_token"  # noqa: S105 (associated data)
ANONYMOUS_FOR = timedelta(hours=24)
MAX_VISITOR_CONTENT = 8000
VISITOR_NAME = "visitor"


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """What the customer's server signed for a visitor (docs/publishing.md)."""

    visitor_id: str
    expires_at: int
    signature: str


class PublicFace(msgspec.Struct, frozen=True, kw_only=True):
    """What anyone may read of a chat: nothing secret."""

    slug: str
    title: str
    description: str
    welcome_message: str
    starter_prompts: tuple[str, ...]
    identity_required: bool


class _Claims(msgspec.Struct, frozen=True, array_like=True):
    org_id: str
    agent_id: UUID
    visitor_id: str
    identified: bool
    expires_at: int  # Unix seconds


class Session(msgspec.Struct, frozen=True, kw_only=True):
    token: str
    visitor_id: str
    identified: bool
    expires_at: datetime


class Visitor(msgspec.Struct, frozen=True, kw_only=True):
    """A visitor whose token was checked, and the chat it came through."""

    chat: PublishedChat
    visitor_id: str
    identified: bool

    @property
    def key(self) -> tuple[str, str, bool]:
        """The visitor, as rate limits count it."""
        return (self.chat.slug, self.visitor_id, self.identified)


def _acting(who: Visitor) -> Principal:
    """Who the turn and the reads act as: the organization, for the visitor."""
    return Principal.for_visitor(who.chat.org_id, who.visitor_id)


class PublicChats:
    def __init__(
        self,
        store: PublishingStore,
        threads: Threads,
        conversation: Conversation,
        org_settings: OrgSettings,
        box: SecretBox,
        clock: Clock,
    ) -> None:
        self._store = store
        self._threads = threads
        self._conversation = conversation
        self._org_settings = org_settings
        self._box = box
        self._clock = clock

    # --- the chat -------------------------------------------------------------

    async def chat(self, slug: str) -> PublishedChat:
        """The active chat of ``slug``; ``NotFound`` when there is none (or it is off)."""
        chat = await self._store.by_slug(slug)
        if chat is None or not chat.is_active:
            raise NotFound("no such chat")
        return chat

    async def domains(self, chat: PublishedChat) -> tuple[str, ...]:
        """The sites the chat may be used from: its own list, else the organization's."""
        if chat.allowed_domains is not None:
            return chat.allowed_domains
        return await self._org_settings.embed_domains(chat.org_id)

    @staticmethod
    def face(chat: PublishedChat) -> PublicFace:
        return PublicFace(
            slug=chat.slug,
            title=chat.title,
            description=chat.description,
            welcome_message=chat.welcome_message,
            starter_prompts=chat.starter_prompts,
            identity_required=chat.visibility == "private",
        )

    # --- sessions -------------------------------------------------------------

    def _secrets(self, chat: PublishedChat) -> list[str]:
        where = identity_context(chat.org_id, chat.agent_id)
        current = self._box.open(chat.identity_sealed, where).decode()
        previous = (
            None
            if chat.previous_sealed is None
            else self._box.open(chat.previous_sealed, where).decode()
        )
        return accepted_secrets(current, previous, chat.rotated_at, self._clock.now())

    def start(self, chat: PublishedChat, identity: Identity | None) -> Session:
        """A visitor token: for the signed visitor when ``identity`` is given (and
        proves it), else for a new anonymous visitor (refused by a private chat)."""
        now = self._clock.now()
        if identity is None:
            if chat.visibility == "private":
                raise Unauthenticated("this chat admits only visitors its site signed in")
            visitor, identified = new_visitor_id(), False
            expires = int((now + ANONYMOUS_FOR).timestamp())
        else:
            proven = signed_by(
                self._secrets(chat),
                identity.visitor_id,
                identity.expires_at,
                identity.signature,
                now,
            )
            if not proven:
                raise Unauthenticated("the visitor's identity is not signed, or has expired")
            visitor, identified, expires = identity.visitor_id, True, identity.expires_at
        claims = _Claims(chat.org_id, chat.agent_id, visitor, identified, expires)
        token = TOKEN_PREFIX + self._box.seal(msgspec.msgpack.encode(claims), TOKEN_CONTEXT)
        return Session(
            token=token,
            visitor_id=visitor,
            identified=identified,
            expires_at=datetime.fromtimestamp(expires, tz=now.tzinfo),
        )

    def visitor(self, chat: PublishedChat, token: str | None) -> Visitor:
        """The visitor ``token`` names, if it is this chat's and still valid."""
        if not token or not token.startswith(TOKEN_PREFIX):
            raise Unauthenticated("send the visitor token: Authorization: Bearer vt_...")
        try:
            raw = self._box.open(token[len(TOKEN_PREFIX) :], TOKEN_CONTEXT)
            claims = msgspec.msgpack.decode(raw, type=_Claims)
        except (SecretUnreadable, msgspec.DecodeError):
            raise Unauthenticated("unknown visitor token") from None
        if (claims.org_id, claims.agent_id) != (chat.org_id, chat.agent_id):
            raise Unauthenticated("this visitor token is another chat's")
        if claims.expires_at <= self._clock.now().timestamp():
            raise Unauthenticated("the visitor token has expired: start a new session")
        if chat.visibility == "private" and not claims.identified:
            raise Unauthenticated("this chat admits only visitors its site signed in")
        return Visitor(chat=chat, visitor_id=claims.visitor_id, identified=claims.identified)

    # --- threads --------------------------------------------------------------

    async def create_thread(self, who: Visitor, title: str | None) -> Thread:
        chat = who.chat
        # the thread's metadata names its visitor and chat wherever the owner reads
        # it (the thread's answers, its usage records); what the visitor owns is
        # the visitor thread's row, which only this use case writes
        marks = {"visitor_id": who.visitor_id, "published_chat": chat.slug}
        thread = await self._threads.create(
            Principal.organization(chat.org_id),
            ThreadDraft(agent_id=chat.agent_id, title=title, metadata=marks),
        )
        await self._store.add_visitor_thread(
            VisitorThread(
                org_id=chat.org_id,
                thread_id=thread.id,
                agent_id=chat.agent_id,
                visitor_id=who.visitor_id,
                identified=who.identified,
                created_at=thread.created_at,
            )
        )
        return thread

    async def _own(self, who: Visitor, thread_id: UUID) -> None:
        """``NotFound`` unless the visitor opened the thread through this chat."""
        found = await self._store.visitor_thread(who.chat.org_id, thread_id)
        if (
            found is None
            or found.agent_id != who.chat.agent_id
            or found.visitor_id != who.visitor_id
            or found.identified != who.identified
        ):
            raise NotFound("thread not found")

    async def check_budget(self, chat: PublishedChat) -> None:
        """``RateLimited`` (``DAILY_COST_CAP_REACHED``) once today's cost of the
        chat's visitor threads reached its cap, until midnight UTC."""
        if chat.daily_cost_cap_usd is None:
            return
        now = self._clock.now()
        start = day_start(now)
        cost = await self._store.visitor_cost(chat.org_id, chat.agent_id, start)
        if cap_reached(chat, cost):
            wait = int((start + timedelta(days=1) - now).total_seconds()) + 1
            raise RateLimited(
                "this chat has reached its daily cost cap; it opens again at midnight UTC",
                wait,
                code="DAILY_COST_CAP_REACHED",
            )

    async def send(self, who: Visitor, thread_id: UUID, content: str) -> Turn:
        check_text("content", content, max_len=MAX_VISITOR_CONTENT, required=True)
        await self._own(who, thread_id)
        await self.check_budget(who.chat)
        grants = who.chat.allow_user_grants and who.identified
        msg = SendInput(
            content=content,
            sender_id=who.visitor_id if grants else None,
            sender_name=VISITOR_NAME,
        )
        return await self._conversation.send(_acting(who), thread_id, msg)

    async def stop(self, who: Visitor, thread_id: UUID) -> bool:
        await self._own(who, thread_id)
        return await self._conversation.stop(
            Principal.for_visitor(who.chat.org_id, who.visitor_id), thread_id
        )

    async def history(
        self, who: Visitor, thread_id: UUID, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        await self._own(who, thread_id)
        return await self._threads.history(
            Principal.for_visitor(who.chat.org_id, who.visitor_id),
            thread_id,
            offset=offset,
            limit=limit,
        )
