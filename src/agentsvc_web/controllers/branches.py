"""A thread's branches over HTTP (docs/threads.md, "Edit, regenerate, branch,
fork"): an edit and a regenerate stream like a send (the turn makes the new
branch), a switch and a fork answer the thread (use_cases/branches.py)."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

import msgspec
from litestar import Controller, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from msgspec import Meta

from agentsvc_core import rules
from agentsvc_core.rules import join_overlay
from agentsvc_core.use_cases import Conversation, SendInput
from agentsvc_core.use_cases.branches import Branches
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.threads import (
    ClientToolBody,
    Req,
    SendMessageBody,
    _client_tools,
    _send_input,
    _sent,
)
from agentsvc_web.model_params import SendParams, params_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import (
    Metadata,
    ModelId,
    Overlay,
    ProfileName,
    ThreadOut,
)
from agentsvc_web.sse import SseStream

__all__ = ["BranchController"]


class RegenerateBody(SendParams, rename="camel"):
    """The send fields that still mean something when the last user message is
    answered again (no content, no tool results), model parameters included."""

    tools: Annotated[list[ClientToolBody], Meta(max_length=rules.MAX_CLIENT_TOOLS)] = []
    model_override: ModelId | None = None
    tool_profile: ProfileName | None = None
    system_prompt_overlay: Overlay | None = None
    metadata: Metadata = {}
    multitask_strategy: Literal["reject", "enqueue", "interrupt"] = "reject"
    include_events: Annotated[list[Literal["compaction"]], Meta(max_length=8)] = []


class BranchBody(msgspec.Struct, rename="camel"):
    message_id: UUID


class ForkBody(msgspec.Struct, rename="camel"):
    message_id: UUID | None = None


class BranchController(Controller):
    path = "/api/threads"
    tags = ["threads"]

    @post(
        "/{thread_id:uuid}/messages/{message_id:uuid}/edit",
        operation_id="editMessage",
        opt=MEMBER,
        status_code=200,
        media_type="text/event-stream",
        response_description="The new reply as Server-Sent Events, as a send's",
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Replace a user message on a new branch; the new reply streams back",
    )
    async def edit_message(
        self,
        request: Req,
        conversation: NamedDependency[Conversation],
        thread_id: FromPath[UUID],
        message_id: FromPath[UUID],
        data: JSONBody[SendMessageBody],
    ) -> SseStream:
        msg = msgspec.structs.replace(_send_input(data), edit_of=message_id)
        return await _sent(request, conversation, thread_id, msg)

    @post(
        "/{thread_id:uuid}/regenerate",
        operation_id="regenerateReply",
        opt=MEMBER,
        status_code=200,
        media_type="text/event-stream",
        response_description="The new reply as Server-Sent Events, as a send's",
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Answer the last user message again on a new branch",
    )
    async def regenerate(
        self,
        request: Req,
        conversation: NamedDependency[Conversation],
        thread_id: FromPath[UUID],
        data: JSONBody[RegenerateBody],
    ) -> SseStream:
        msg = SendInput(
            content="",
            tools=_client_tools(data.tools),
            model_override=data.model_override,
            tool_profile=data.tool_profile,
            system_prompt_overlay=join_overlay(data.system_prompt_overlay),
            metadata=data.metadata,
            multitask_strategy=data.multitask_strategy,
            regenerate=True,
            params=params_of(data),
            include_events=frozenset(data.include_events),
        )
        return await _sent(request, conversation, thread_id, msg)

    @put(
        "/{thread_id:uuid}/branch",
        operation_id="switchBranch",
        opt=MEMBER,
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Make a message's branch the current one (its latest leaf becomes the head)",
    )
    async def switch_branch(
        self,
        request: Req,
        branches: NamedDependency[Branches],
        thread_id: FromPath[UUID],
        data: JSONBody[BranchBody],
    ) -> ThreadOut:
        thread = await branches.switch(principal_of(request), thread_id, data.message_id)
        return ThreadOut.of(thread)

    @post(
        "/{thread_id:uuid}/fork",
        operation_id="forkThread",
        opt=MEMBER,
        status_code=201,
        responses=errors(400, 403, 404, 413, 415, 422),
        summary="A new thread of the same agent holding a copy of a branch up to a message",
    )
    async def fork(
        self,
        request: Req,
        branches: NamedDependency[Branches],
        thread_id: FromPath[UUID],
        data: JSONBody[ForkBody],
    ) -> ThreadOut:
        return ThreadOut.of(await branches.fork(principal_of(request), thread_id, data.message_id))
