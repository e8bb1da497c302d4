"""Multiplayer threads (docs/multiplayer.md): ``GET/PUT /api/agents/{id}/multiplayer``,
the agent's configuration, and ``GET /api/threads/{id}/events``, a thread's live
events as Server-Sent Events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.response import Stream
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.partial import given_fields
from agentsvc_core.rules import MAX_OFFSET
from agentsvc_core.use_cases.multiplayer.config import (
    MAX_DISPLAY_NAME,
    MAX_PARTICIPANTS,
    MIN_PARTICIPANTS,
    MultiplayerConfig,
    MultiplayerSettings,
)
from agentsvc_core.use_cases.multiplayer.events import ThreadEvents, ThreadFeed
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied
from agentsvc_web.sse import KEEPALIVE, SSE_HEADERS, LastEventId, resume_from

Req = Request[Any, Any, Any]

_encoder = msgspec.json.Encoder()


class MultiplayerPutBody(msgspec.Struct, rename="camel"):
    enabled: bool | UnsetType = UNSET
    respond_to: Literal["all", "mentions", "owners"] | UnsetType = UNSET
    display_name: (
        Annotated[str, Meta(min_length=1, max_length=MAX_DISPLAY_NAME)] | UnsetType | None
    ) = UNSET
    max_participants: Annotated[int, Meta(ge=MIN_PARTICIPANTS, le=MAX_PARTICIPANTS)] | UnsetType = (
        UNSET
    )


class MultiplayerOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    enabled: bool
    respond_to: str
    display_name: str | None
    max_participants: int

    @classmethod
    def of(cls, c: MultiplayerConfig) -> MultiplayerOut:
        return copied(cls, c)


class AgentMultiplayerController(Controller):
    path = "/api/agents/{agent_id:uuid}/multiplayer"
    tags = ["multiplayer"]

    @get(
        "/",
        operation_id="getAgentMultiplayer",
        responses=errors(404),
        summary="The agent's multiplayer configuration",
    )
    async def get_config(
        self,
        request: Req,
        multiplayer: NamedDependency[MultiplayerSettings],
        agent_id: FromPath[UUID],
    ) -> MultiplayerOut:
        return MultiplayerOut.of(await multiplayer.get(principal_of(request), agent_id))

    @put(
        "/",
        operation_id="putAgentMultiplayer",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied multiplayer settings",
    )
    async def put_config(
        self,
        request: Req,
        multiplayer: NamedDependency[MultiplayerSettings],
        agent_id: FromPath[UUID],
        data: JSONBody[MultiplayerPutBody],
    ) -> MultiplayerOut:
        config = await multiplayer.update(principal_of(request), agent_id, given_fields(data))
        return MultiplayerOut.of(config)


async def _frames(feed: ThreadFeed, keepalive_s: float) -> AsyncIterator[bytes]:
    """The feed's events as SSE frames (``id:`` only on the replayable ones), a
    keep-alive comment while nothing happens, until the service shuts down; the feed
    is closed when the client leaves (Litestar cancels the stream)."""
    try:
        while True:
            events = await feed.read(keepalive_s)
            if events is None:
                yield KEEPALIVE
                continue
            if not events:
                return  # the service is shutting down: the client reconnects elsewhere
            chunk = bytearray()
            for e in events:
                if e.id is not None:
                    chunk += b"id: %d\n" % e.id
                chunk += b"event: %s\ndata: " % e.name.encode()
                chunk += _encoder.encode(e.data)
                chunk += b"\n\n"
            yield bytes(chunk)
    finally:
        feed.close()


class ThreadEventsController(Controller):
    path = "/api/threads"
    tags = ["multiplayer"]

    @get(
        "/{thread_id:uuid}/events",
        operation_id="threadEvents",
        media_type="text/event-stream",
        response_description=(
            "The thread's messages and replies as they are stored (message, reply; id: the"
            " message's position in the history) and reply_started, as Server-Sent Events"
        ),
        responses=errors(403, 404, 422),
        summary="Follow a multiplayer thread live (re-attach with Last-Event-ID)",
    )
    async def thread_events(
        self,
        request: Req,
        thread_events: NamedDependency[ThreadEvents],
        thread_id: FromPath[UUID],
        after: Annotated[int | None, QueryParameter(name="after", ge=0, le=MAX_OFFSET)] = None,
        last_event_id: LastEventId = "",
    ) -> Stream:
        seen = resume_from(last_event_id, after)
        feed = await thread_events.follow(principal_of(request), thread_id, seen)
        return Stream(
            _frames(feed, request.app.state.sse_keepalive_s),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
