"""``/api/agents/{id}/publish``: the agent's published chat, as its owner manages
it (docs/publishing.md). Reads are the members'; changes and the visitors'
threads are an admin's."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter

from agentsvc_core.use_cases.publishing import ChatChanges, ChatDraft, Publishing
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.publishing.schemas import (
    ChatOut,
    ChatPatchBody,
    PublishBody,
    VisitorThreadListOut,
    VisitorThreadOut,
)
from agentsvc_web.drafts import draft_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, cursor_text, read_cursor

Req = Request[Any, Any, Any]
Cursor = Annotated[str | None, QueryParameter(name="cursor", max_length=100)]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=100)]


class AgentPublishController(Controller):
    path = "/api/agents/{agent_id:uuid}/publish"
    tags = ["publishing"]

    @get(
        "/",
        operation_id="getAgentPublish",
        responses=errors(404),
        summary="The agent's published chat, with today's cost (404 when not published)",
    )
    async def get_chat(
        self, request: Req, publishing: NamedDependency[Publishing], agent_id: FromPath[UUID]
    ) -> ChatOut:
        return ChatOut.of(await publishing.get(principal_of(request), agent_id))

    @post(
        "/",
        operation_id="publishAgent",
        status_code=201,
        responses=errors(400, 404, 409, 413, 415, 422),
        summary="Publish the agent as a chat (409 SLUG_TAKEN, ALREADY_PUBLISHED); the"
        " identity secret is shown in this answer only",
    )
    async def publish(
        self,
        request: Req,
        publishing: NamedDependency[Publishing],
        agent_id: FromPath[UUID],
        data: JSONBody[PublishBody],
    ) -> ChatOut:
        draft = draft_of(data, ChatDraft)
        return ChatOut.of(await publishing.publish(principal_of(request), agent_id, draft))

    @patch(
        "/",
        operation_id="updateAgentPublish",
        responses=errors(400, 404, 409, 413, 415, 422),
        summary="Change the supplied fields; rotateIdentitySecret shows a new secret once",
    )
    async def update(
        self,
        request: Req,
        publishing: NamedDependency[Publishing],
        agent_id: FromPath[UUID],
        data: JSONBody[ChatPatchBody],
    ) -> ChatOut:
        changes = draft_of(data, ChatChanges)
        return ChatOut.of(await publishing.update(principal_of(request), agent_id, changes))

    @delete(
        "/",
        operation_id="unpublishAgent",
        status_code=200,
        responses=errors(404),
        summary="Unpublish the agent (its visitors' threads stay)",
    )
    async def unpublish(
        self, request: Req, publishing: NamedDependency[Publishing], agent_id: FromPath[UUID]
    ) -> OkBody:
        await publishing.unpublish(principal_of(request), agent_id)
        return OkBody(ok=True)

    @get(
        "/threads",
        operation_id="listVisitorThreads",
        opt=ADMIN,
        responses=errors(403, 404, 422),
        summary="The threads visitors opened through the chat, newest first, by pages",
    )
    async def visitor_threads(
        self,
        request: Req,
        publishing: NamedDependency[Publishing],
        agent_id: FromPath[UUID],
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> VisitorThreadListOut:
        after = read_cursor(cursor)
        rows, more = await publishing.visitor_threads(
            principal_of(request),
            agent_id,
            before=None if after is None else after[0],
            limit=limit,
        )
        return VisitorThreadListOut(
            threads=[VisitorThreadOut.of(v) for v in rows],
            next_cursor=None if more is None else cursor_text(more, rows[-1].thread_id),
        )
