from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta

from agentsvc_core import rules
from agentsvc_core.errors import InvalidInput, PermissionDenied
from agentsvc_core.ports import ToolSpec
from agentsvc_core.rules import MAX_OFFSET, join_overlay
from agentsvc_core.use_cases import (
    Conversation,
    SendInput,
    ThreadChanges,
    ThreadDraft,
    Threads,
    ToolApprovalIn,
    ToolResultIn,
)
from agentsvc_core.use_cases.branches import Branches
from agentsvc_core.use_cases.erasure import Erasure
from agentsvc_core.use_cases.threads import MAX_QUERY
from agentsvc_core.use_cases.turn.events import EventSource
from agentsvc_core.use_cases.turn.streams import Streams
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.idempotency import request_key
from agentsvc_web.model_params import SendParams, params_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import (
    MessageListOut,
    MessageOut,
    Metadata,
    ModelId,
    OkBody,
    Overlay,
    ParticipantBody,
    ParticipantListOut,
    ParticipantOut,
    ParticipantRemoveBody,
    ProfileName,
    ThreadCreateBody,
    ThreadListOut,
    ThreadOut,
    ThreadPatchBody,
    Title,
    UserId,
)
from agentsvc_web.sse import (
    MAX_EVENT_ID,
    SSE_HEADERS,
    LastEventId,
    SseStream,
    resume_from,
    sse_frames,
)

Req = Request[Any, Any, Any]


def _cursor(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    try:
        value = msgspec.convert(raw, datetime)
    except msgspec.ValidationError:
        raise InvalidInput("cursor", "must be an RFC 3339 timestamp (a nextCursor)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _has_key(request: Req) -> bool:
    return "idempotency-key" in request.headers


def _sse(request: Req, source: EventSource, start: int = 0) -> SseStream:
    """The events of ``source`` from index ``start`` on, as Server-Sent Events. The
    keep-alive interval comes from the app's state, not a second dependency: two
    dependencies of one handler make Litestar resolve them in a task group on every
    send (about 0.08 ms of CPU per turn, measured)."""
    return SseStream(
        sse_frames(source, request.app.state.sse_keepalive_s, start=start),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


def _client_tools(tools: list[ClientToolBody]) -> list[ToolSpec]:
    return [
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters) for t in tools
    ]


def _send_input(data: SendMessageBody) -> SendInput:
    return SendInput(
        content=data.content,
        tools=_client_tools(data.tools),
        tool_results=[
            ToolResultIn(tool_call_id=r.tool_call_id, output=r.output) for r in data.tool_results
        ],
        model_override=data.model_override,
        sender_name=data.sender_name,
        sender_id=data.sender_id,
        tool_profile=data.tool_profile,
        system_prompt_overlay=join_overlay(data.system_prompt_overlay),
        tool_approvals=[
            ToolApprovalIn(tool_call_id=a.tool_call_id, approved=a.approved, reason=a.reason)
            for a in data.tool_approvals
        ],
        metadata=data.metadata,
        multitask_strategy=data.multitask_strategy,
        include_events=frozenset(data.include_events),
        params=params_of(data),
    )


async def _sent(
    request: Req, conversation: Conversation, thread_id: UUID, msg: SendInput
) -> SseStream:
    """A send (or an edit, or a regenerate), once or by its idempotency key."""
    who = principal_of(request)
    key = request_key(request.scope, await request.body()) if _has_key(request) else None
    turn = (
        await conversation.post(who, thread_id, msg)
        if key is None
        else await conversation.send_once(who, thread_id, msg, key)
    )
    return _sse(request, turn)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class ClientToolBody(msgspec.Struct, rename="camel"):
    name: Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    description: Annotated[str, Meta(max_length=rules.MAX_DESCRIPTION)] = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class ToolResultBody(msgspec.Struct, rename="camel"):
    tool_call_id: Annotated[str, Meta(min_length=1, max_length=256)]
    output: str


class ToolApprovalBody(msgspec.Struct, rename="camel"):
    """A person's answer to a server-side call waiting for approval (docs/tools.md)."""

    tool_call_id: Annotated[str, Meta(min_length=1, max_length=256)]
    approved: bool
    reason: Annotated[str, Meta(max_length=rules.MAX_DESCRIPTION)] | None = None


class SendMessageBody(SendParams, rename="camel"):
    """A send, with its model parameters (``SendParams``: temperature, topP, ...)."""

    content: str
    tools: Annotated[list[ClientToolBody], Meta(max_length=rules.MAX_CLIENT_TOOLS)] = []
    tool_results: list[ToolResultBody] = []
    # answers to the calls a requires_action listed with kind "approval"
    tool_approvals: list[ToolApprovalBody] = []
    model_override: ModelId | None = None
    sender_name: Title | None = None
    sender_id: UserId | None = None
    tool_profile: ProfileName | None = None
    system_prompt_overlay: Overlay | None = None
    metadata: Metadata = {}
    # a busy thread: refuse (409 THREAD_BUSY, the spec's behaviour), wait for its
    # reply, or stop it (docs/client-guide.md)
    multitask_strategy: Literal["reject", "enqueue", "interrupt"] = "reject"
    # events sent only when asked for (docs/compaction.md); any other name is 422
    include_events: Annotated[list[Literal["compaction"]], Meta(max_length=8)] = []


class ThreadController(Controller):
    path = "/api/threads"
    tags = ["threads"]

    @post(
        "/",
        operation_id="createThread",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Open a thread with an agent",
    )
    async def create_thread(
        self, request: Req, threads: NamedDependency[Threads], data: JSONBody[ThreadCreateBody]
    ) -> ThreadOut:
        draft = ThreadDraft(
            agent_id=data.agent_id,
            title=data.title,
            kind=data.kind,
            resource_bindings=data.resource_bindings,
            active_profile=data.active_profile,
            system_prompt_overlay=join_overlay(data.system_prompt_overlay),
            metadata=data.metadata,
        )
        return ThreadOut.of(await threads.create(principal_of(request), draft))

    @get(
        "/",
        operation_id="listThreads",
        responses=errors(403, 422),
        summary="An agent's threads, newest first, by pages (?q=: those holding its words)",
    )
    async def list_threads(
        self,
        request: Req,
        threads: NamedDependency[Threads],
        agent_id: Annotated[UUID, QueryParameter(name="agentId")],
        cursor: Annotated[
            str | None,
            QueryParameter(name="cursor", max_length=64, schema_extra={"format": "date-time"}),
        ] = None,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=100)] = 50,
        org_id: Annotated[str | None, QueryParameter(name="orgId", max_length=128)] = None,
        q: Annotated[
            str | None,
            QueryParameter(
                name="q",
                max_length=MAX_QUERY,
                description=(
                    "search: the threads whose title or one of whose messages holds"
                    " every word, each as the start of a word (docs/threads.md)"
                ),
            ),
        ] = None,
    ) -> ThreadListOut:
        who = principal_of(request)
        if org_id is not None and org_id != who.org_id:
            raise PermissionDenied("this credential belongs to another organization")
        page = await threads.list_for_agent(who, agent_id, cursor=_cursor(cursor), limit=limit, q=q)
        return ThreadListOut(
            threads=[ThreadOut.of(t) for t in page.threads],
            next_cursor=None if page.next_cursor is None else _iso(page.next_cursor),
        )

    @patch(
        "/{thread_id:uuid}",
        operation_id="updateThread",
        opt=MEMBER,
        responses=errors(400, 403, 404, 413, 415, 422),
        summary="Change a thread (null clears; metadata is replaced whole)",
    )
    async def patch_thread(
        self,
        request: Req,
        threads: NamedDependency[Threads],
        thread_id: FromPath[UUID],
        data: JSONBody[ThreadPatchBody],
    ) -> ThreadOut:
        changes = ThreadChanges(
            title=data.title,
            active_profile=data.active_profile,
            system_prompt_overlay=UNSET
            if data.system_prompt_overlay is UNSET
            else join_overlay(data.system_prompt_overlay),
            metadata=data.metadata,
        )
        return ThreadOut.of(await threads.update(principal_of(request), thread_id, changes))

    @get(
        "/{thread_id:uuid}",
        operation_id="getThread",
        responses=errors(403, 404),
        summary="Get a thread",
    )
    async def get_thread(
        self, request: Req, threads: NamedDependency[Threads], thread_id: FromPath[UUID]
    ) -> ThreadOut:
        return ThreadOut.of(await threads.visible(principal_of(request), thread_id))

    @delete(
        "/{thread_id:uuid}",
        operation_id="deleteThread",
        opt=MEMBER,
        status_code=200,
        responses=errors(403, 404, 409),
        summary=(
            "Delete a thread with its messages, and scrub its text from traces (its reply"
            " is stopped first)"
        ),
    )
    async def delete_thread(
        self, request: Req, erasure: NamedDependency[Erasure], thread_id: FromPath[UUID]
    ) -> OkBody:
        await erasure.delete_thread(principal_of(request), thread_id)
        return OkBody(ok=True)

    @post(
        "/{thread_id:uuid}/messages",
        operation_id="sendMessage",
        opt=MEMBER,
        status_code=200,
        media_type="text/event-stream",
        response_description="The reply as Server-Sent Events: meta, tokens, then done or error",
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Send a user message; the reply streams back as Server-Sent Events",
    )
    async def send_message(
        self,
        request: Req,
        conversation: NamedDependency[Conversation],
        thread_id: FromPath[UUID],
        data: JSONBody[SendMessageBody],
    ) -> SseStream:
        return await _sent(request, conversation, thread_id, _send_input(data))

    @get(
        "/{thread_id:uuid}/stream",
        operation_id="streamReply",
        media_type="text/event-stream",
        response_description=(
            "The reply's events after the one last seen (Last-Event-ID, or after), then"
            " the live rest until done or error, as the send streams them"
        ),
        responses=errors(403, 404, 422),
        summary="Re-attach to a reply's stream after a dropped connection",
    )
    async def stream_reply(
        self,
        request: Req,
        streams: NamedDependency[Streams],
        thread_id: FromPath[UUID],
        run_id: Annotated[UUID | None, QueryParameter(name="runId")] = None,
        after: Annotated[int, QueryParameter(name="after", ge=0, le=MAX_EVENT_ID)] = 0,
        last_event_id: LastEventId = "",
    ) -> SseStream:
        seen = resume_from(last_event_id, after)
        source = await streams.follow(principal_of(request), thread_id, run_id, seen)
        return _sse(request, source, seen)

    @get(
        "/{thread_id:uuid}/messages",
        operation_id="listMessages",
        responses=errors(403, 404, 422),
        summary="The thread's user and assistant messages, oldest first",
    )
    async def list_messages(
        self,
        request: Req,
        branches: NamedDependency[Branches],
        thread_id: FromPath[UUID],
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=200)] = 100,
        offset: Annotated[int, QueryParameter(name="offset", ge=0, le=MAX_OFFSET)] = 0,
        branch: Annotated[
            UUID | None,
            QueryParameter(
                name="branch",
                description="a message id: the branch that ends there (default: the current)",
            ),
        ] = None,
    ) -> MessageListOut:
        messages, total = await branches.history(
            principal_of(request), thread_id, offset=offset, limit=limit, branch=branch
        )
        return MessageListOut(messages=[MessageOut.of(m) for m in messages], total=total)

    @post(
        "/{thread_id:uuid}/stop",
        operation_id="stopThread",
        opt=MEMBER,
        status_code=200,
        responses=errors(403, 404),
        summary="Stop the running reply (ok is false when nothing runs)",
    )
    async def stop(
        self, request: Req, conversation: NamedDependency[Conversation], thread_id: FromPath[UUID]
    ) -> OkBody:
        return OkBody(ok=await conversation.stop(principal_of(request), thread_id))

    @get(
        "/{thread_id:uuid}/participants",
        operation_id="listParticipants",
        responses=errors(403, 404, 422),
        summary="Participants of a multiplayer thread",
    )
    async def list_participants(
        self, request: Req, threads: NamedDependency[Threads], thread_id: FromPath[UUID]
    ) -> ParticipantListOut:
        found = await threads.participants(principal_of(request), thread_id)
        return ParticipantListOut(participants=[ParticipantOut.of(p) for p in found])

    @post(
        "/{thread_id:uuid}/participants",
        operation_id="addParticipant",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Add a participant, or change its role and display name",
    )
    async def add_participant(
        self,
        request: Req,
        threads: NamedDependency[Threads],
        thread_id: FromPath[UUID],
        data: JSONBody[ParticipantBody],
    ) -> ParticipantOut:
        p = await threads.add_participant(
            principal_of(request), thread_id, data.user_id, data.display_name, data.role
        )
        return ParticipantOut.of(p)

    @delete(
        "/{thread_id:uuid}/participants",
        operation_id="removeParticipant",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 403, 404, 413, 415, 422),
        summary="Remove a participant",
    )
    async def remove_participant(
        self,
        request: Req,
        threads: NamedDependency[Threads],
        thread_id: FromPath[UUID],
        data: JSONBody[ParticipantRemoveBody],
    ) -> OkBody:
        await threads.remove_participant(principal_of(request), thread_id, data.user_id)
        return OkBody(ok=True)
