"""A published chat's public routes, ``/api/public/chat/{slug}``, and the public
marketplace listing, ``/api/public/marketplace`` (docs/publishing.md).

No API key: a visitor token (``Authorization: Bearer vt_...``, from
``POST .../sessions``) authenticates what a visitor does, and can do nothing
else. Every route checks the browser's ``Origin`` against the chat's sites and
answers CORS for those only (``guards``); the writes are rate-limited per
address, per visitor and per chat."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter

from agentsvc_core.entities.published_chat import PublishedChat
from agentsvc_core.errors import DomainError, InvalidInput
from agentsvc_core.rules import MAX_OFFSET
from agentsvc_core.use_cases.publishing import Identity, PublicChats, Visitor
from agentsvc_core.use_cases.publishing.listing import PublicListing
from agentsvc_web.controllers.publishing.guards import (
    ChatLimits,
    allowed_origin,
    cors_headers,
    preflight_headers,
)
from agentsvc_web.controllers.publishing.schemas import (
    ListedOut,
    MarketplacePageOut,
    PublicFaceOut,
    SessionBody,
    SessionOut,
    VisitorMessageBody,
    VisitorMessageListOut,
    VisitorMessageOut,
    VisitorThreadBody,
    VisitorThreadCreatedOut,
)
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, cursor_text, read_cursor
from agentsvc_web.sse import SSE_HEADERS, SseStream, sse_frames

Req = Request[Any, Any, Any]
CHAT_PATH = "/api/public/chat/"


def _limits(request: Req) -> ChatLimits:
    limits = request.app.state.chat_limits
    assert isinstance(limits, ChatLimits)
    return limits


def _token(request: Req) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


async def _chat(
    request: Req, chats: PublicChats, slug: str
) -> tuple[PublishedChat, dict[str, str]]:
    """The active chat, once the request's origin passed; its CORS headers."""
    chat = await chats.chat(slug)
    origin = allowed_origin(request, await chats.domains(chat))
    return chat, cors_headers(origin)


async def _visitor(request: Req, chats: PublicChats, slug: str) -> tuple[Visitor, dict[str, str]]:
    chat, headers = await _chat(request, chats, slug)
    _limits(request).address(request, chat)
    who = chats.visitor(chat, _token(request))
    return who, headers


async def preflight(request: Req) -> dict[str, str]:
    """The CORS headers of a preflight (``OPTIONS``) of a chat's route: for an
    allowed origin only (``options.answer_options`` asks)."""
    origin = request.headers.get("origin")
    rest = request.url.path[len(CHAT_PATH) :]
    slug = rest.split("/", 1)[0]
    if origin is None or not slug:
        return {}
    chats = request.app.state.public_chats
    assert isinstance(chats, PublicChats)
    try:
        chat = await chats.chat(slug)
        if allowed_origin(request, await chats.domains(chat)) is None:
            return {}
    except DomainError:  # an unknown chat, a refused site: no CORS at all
        return {}
    return preflight_headers(origin)


class PublicChatController(Controller):
    path = "/api/public/chat/{slug:str}"
    tags = ["public chat"]

    @get(
        "/",
        operation_id="getPublicChat",
        security=[],
        responses=errors(403, 404, 429),
        summary="The chat's public face: title, welcome message, starter prompts",
    )
    async def face(
        self, request: Req, public_chats: NamedDependency[PublicChats], slug: FromPath[str]
    ) -> Response[PublicFaceOut]:
        chat, headers = await _chat(request, public_chats, slug)
        _limits(request).address(request, chat)
        return Response(PublicFaceOut.of(public_chats.face(chat)), headers=headers)

    @post(
        "/sessions",
        operation_id="startVisitorSession",
        security=[],
        status_code=201,
        responses=errors(400, 403, 404, 413, 415, 422, 429),
        summary="Start a visitor session: a visitor token (a private chat needs the"
        " site's signed identity)",
    )
    async def start(
        self,
        request: Req,
        public_chats: NamedDependency[PublicChats],
        slug: FromPath[str],
        data: JSONBody[SessionBody],
    ) -> Response[SessionOut]:
        chat, headers = await _chat(request, public_chats, slug)
        _limits(request).address(request, chat)
        given = (data.visitor_id, data.expires_at, data.signature)
        if any(v is not None for v in given) and any(v is None for v in given):
            raise InvalidInput("visitor_id", "visitorId, expiresAt and signature go together")
        identity = (
            None
            if data.visitor_id is None or data.expires_at is None or data.signature is None
            else Identity(
                visitor_id=data.visitor_id, expires_at=data.expires_at, signature=data.signature
            )
        )
        session = public_chats.start(chat, identity)
        return Response(SessionOut.of(session), status_code=201, headers=headers)

    @post(
        "/threads",
        operation_id="createVisitorThread",
        security=[],
        status_code=201,
        responses=errors(400, 403, 404, 413, 415, 422, 429),
        summary="Open a thread with the chat's agent (the visitor's own)",
    )
    async def create_thread(
        self,
        request: Req,
        public_chats: NamedDependency[PublicChats],
        slug: FromPath[str],
        data: JSONBody[VisitorThreadBody],
    ) -> Response[VisitorThreadCreatedOut]:
        who, headers = await _visitor(request, public_chats, slug)
        _limits(request).visitor(who.chat, who.key)
        thread = await public_chats.create_thread(who, data.title)
        out = VisitorThreadCreatedOut(
            id=thread.id, title=thread.title, created_at=thread.created_at
        )
        return Response(out, status_code=201, headers=headers)

    @post(
        "/threads/{thread_id:uuid}/messages",
        operation_id="sendVisitorMessage",
        security=[],
        status_code=200,
        media_type="text/event-stream",
        response_description="The reply as Server-Sent Events, as the private API streams it",
        responses=errors(400, 403, 404, 409, 413, 415, 422, 429),
        summary="Send a message to the visitor's thread; the reply streams back"
        " (429 DAILY_COST_CAP_REACHED once the chat's daily cap is reached)",
    )
    async def send(
        self,
        request: Req,
        public_chats: NamedDependency[PublicChats],
        slug: FromPath[str],
        thread_id: FromPath[UUID],
        data: JSONBody[VisitorMessageBody],
    ) -> SseStream:
        who, headers = await _visitor(request, public_chats, slug)
        _limits(request).visitor(who.chat, who.key)
        turn = await public_chats.send(who, thread_id, data.content)
        return SseStream(
            sse_frames(turn, request.app.state.sse_keepalive_s, start=0),
            media_type="text/event-stream",
            headers={**SSE_HEADERS, **headers},
        )

    @post(
        "/threads/{thread_id:uuid}/stop",
        operation_id="stopVisitorThread",
        security=[],
        status_code=200,
        responses=errors(403, 404, 429),
        summary="Stop the running reply of the visitor's thread",
    )
    async def stop(
        self,
        request: Req,
        public_chats: NamedDependency[PublicChats],
        slug: FromPath[str],
        thread_id: FromPath[UUID],
    ) -> Response[OkBody]:
        who, headers = await _visitor(request, public_chats, slug)
        return Response(OkBody(ok=await public_chats.stop(who, thread_id)), headers=headers)

    @get(
        "/threads/{thread_id:uuid}/messages",
        operation_id="listVisitorMessages",
        security=[],
        responses=errors(403, 404, 422, 429),
        summary="The visitor's thread: its user and assistant messages, oldest first",
    )
    async def history(
        self,
        request: Req,
        public_chats: NamedDependency[PublicChats],
        slug: FromPath[str],
        thread_id: FromPath[UUID],
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=200)] = 100,
        offset: Annotated[int, QueryParameter(name="offset", ge=0, le=MAX_OFFSET)] = 0,
    ) -> Response[VisitorMessageListOut]:
        who, headers = await _visitor(request, public_chats, slug)
        messages, total = await public_chats.history(who, thread_id, offset=offset, limit=limit)
        out = VisitorMessageListOut(
            messages=[VisitorMessageOut.of(m) for m in messages], total=total
        )
        return Response(out, headers=headers)


class PublicMarketplaceController(Controller):
    path = "/api/public/marketplace"
    tags = ["public chat"]

    @get(
        "/",
        operation_id="listPublicMarketplace",
        security=[],
        responses=errors(422),
        summary="Listed agents with an active public chat, newest first, by pages"
        " (?q= words, ?category=)",
    )
    async def listing(
        self,
        public_listing: NamedDependency[PublicListing],
        q: Annotated[str | None, QueryParameter(name="q", max_length=200)] = None,
        category: Annotated[str | None, QueryParameter(name="category", max_length=40)] = None,
        cursor: Annotated[str | None, QueryParameter(name="cursor", max_length=100)] = None,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=100)] = 50,
    ) -> MarketplacePageOut:
        after = read_cursor(cursor)
        rows, more = await public_listing.page(
            q=q, category=category, before=None if after is None else after[0], limit=limit
        )
        return MarketplacePageOut(
            agents=[ListedOut.of(r) for r in rows],
            next_cursor=None if not more else cursor_text(rows[-1].published_at, rows[-1].agent_id),
        )
