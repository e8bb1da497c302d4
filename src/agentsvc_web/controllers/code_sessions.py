"""Code agents and code sessions (docs/code-agents.md): ``/api/code-agents`` and
``/api/code-sessions`` with a session's ``messages``, ``events``, ``cancel`` and
``archive``.

Roles are the house's: reads are the members', changes (a session started, a
follow-up, a cancel) an admin's. ``GET .../events`` answers a page of the
timeline as JSON, or, with ``Accept: text/event-stream``, follows it live (each
event's ``id`` is its ``seq``; a client re-attaches with ``Last-Event-ID``) and
ends once the session has ended and every event was sent."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import Meta

from agentsvc_core.entities.code_session import CodeAgent, CodeSession
from agentsvc_core.use_cases.code_sessions import (
    CodeAgentChanges,
    CodeAgentDraft,
    CodeAgents,
    CodeSessions,
    SessionDraft,
)
from agentsvc_web.auth import principal_of
from agentsvc_web.drafts import camel_body, draft_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, copied, cursor_text, read_cursor
from agentsvc_web.sequenced import (
    After,
    EventLimit,
    SequencedEventOut,
    followed,
    wants_live,
)
from agentsvc_web.sse import LastEventId, resume_from

__all__ = ["CodeAgentsController", "CodeSessionsController"]

Req = Request[Any, Any, Any]
Cursor = Annotated[str | None, QueryParameter(name="cursor", max_length=100)]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=100)]

if TYPE_CHECKING:
    CodeAgentBody = CodeAgentDraft
    CodeAgentPatchBody = CodeAgentChanges
    CodeSessionBody = SessionDraft
else:
    CodeAgentBody = camel_body(CodeAgentDraft, "CodeAgentBody", __name__)
    CodeAgentPatchBody = camel_body(CodeAgentChanges, "CodeAgentPatchBody", __name__)
    CodeSessionBody = camel_body(SessionDraft, "CodeSessionBody", __name__)


class CodeComputerOut(msgspec.Struct):
    provider: str | None
    memory_mb: int
    exec_timeout_s: int
    network: str
    allowed_hosts: list[str]


class CodeAgentOut(msgspec.Struct):
    """A code agent: never its git credential (``has_git_credential`` only)."""

    id: UUID
    name: str
    model: str
    repo_url: str | None
    starting_ref: str | None
    preamble: str
    branch_prefix: str
    auto_create_pr: bool
    has_git_credential: bool
    computer: CodeComputerOut
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, a: CodeAgent) -> CodeAgentOut:
        c = a.computer
        return copied(
            cls,
            a,
            has_git_credential=a.git_credential_sealed is not None,
            computer=CodeComputerOut(
                provider=c.provider,
                memory_mb=c.memory_mb,
                exec_timeout_s=c.exec_timeout_s,
                network=c.network,
                allowed_hosts=list(c.allowed_hosts),
            ),
        )


class UsageOut(msgspec.Struct):
    tokens: int
    cost_usd: float


class CodeSessionOut(msgspec.Struct):
    """A session: ``status`` is pending, creating, running, awaiting_input,
    finished, error, cancelled or expired; ``archived`` once its sandbox and
    stored key are gone."""

    id: UUID
    code_agent_id: UUID
    status: str
    title: str
    repo_url: str
    ref: str | None
    branch: str | None
    pr_url: str | None
    usage: UsageOut
    error: str | None
    last_event_seq: int
    archived: bool
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, s: CodeSession) -> CodeSessionOut:
        return copied(cls, s, usage=UsageOut(tokens=s.usage.tokens, cost_usd=s.usage.cost_usd))


class CodeSessionListOut(msgspec.Struct, rename="camel"):
    sessions: list[CodeSessionOut]
    next_cursor: str | None


class SessionEventOut(SequencedEventOut):
    """One item of the timeline: ``type`` is status, message, tool_call,
    tool_result, command, file_change, usage, pull_request or notice."""


class SessionEventsOut(msgspec.Struct):
    events: list[SessionEventOut]
    next_after: int | None


class TitleBody(msgspec.Struct, frozen=True):
    title: Annotated[str, Meta(min_length=1, max_length=200)]


class MessageBody(msgspec.Struct, frozen=True):
    content: Annotated[str, Meta(min_length=1, max_length=100_000)]


class CodeAgentsController(Controller):
    path = "/api/code-agents"
    tags = ["code agents"]

    @get(
        "/", operation_id="listCodeAgents", responses=errors(), summary="Code agents, oldest first"
    )
    async def list_agents(
        self, request: Req, code_agents: NamedDependency[CodeAgents]
    ) -> list[CodeAgentOut]:
        return [CodeAgentOut.of(a) for a in await code_agents.list(principal_of(request))]

    @post(
        "/",
        operation_id="createCodeAgent",
        status_code=201,
        responses=errors(400, 413, 415, 422),
        summary="Make a code agent (a template of code sessions)",
    )
    async def create(
        self, request: Req, code_agents: NamedDependency[CodeAgents], data: JSONBody[CodeAgentBody]
    ) -> CodeAgentOut:
        draft = draft_of(data, CodeAgentDraft)
        return CodeAgentOut.of(await code_agents.create(principal_of(request), draft))

    @get(
        "/{code_agent_id:uuid}",
        operation_id="getCodeAgent",
        responses=errors(404),
        summary="A code agent",
    )
    async def get_agent(
        self, request: Req, code_agents: NamedDependency[CodeAgents], code_agent_id: FromPath[UUID]
    ) -> CodeAgentOut:
        return CodeAgentOut.of(await code_agents.get(principal_of(request), code_agent_id))

    @patch(
        "/{code_agent_id:uuid}",
        operation_id="updateCodeAgent",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied fields (gitCredential null removes it)",
    )
    async def update(
        self,
        request: Req,
        code_agents: NamedDependency[CodeAgents],
        code_agent_id: FromPath[UUID],
        data: JSONBody[CodeAgentPatchBody],
    ) -> CodeAgentOut:
        changes = draft_of(data, CodeAgentChanges)
        return CodeAgentOut.of(
            await code_agents.update(principal_of(request), code_agent_id, changes)
        )

    @delete(
        "/{code_agent_id:uuid}",
        operation_id="deleteCodeAgent",
        status_code=200,
        responses=errors(404),
        summary="Delete a code agent (its sessions stay)",
    )
    async def remove(
        self, request: Req, code_agents: NamedDependency[CodeAgents], code_agent_id: FromPath[UUID]
    ) -> OkBody:
        await code_agents.delete(principal_of(request), code_agent_id)
        return OkBody(ok=True)


class CodeSessionsController(Controller):
    path = "/api/code-sessions"
    tags = ["code sessions"]

    @get(
        "/",
        operation_id="listCodeSessions",
        responses=errors(422),
        summary="Code sessions, newest first, by pages",
    )
    async def list_sessions(
        self,
        request: Req,
        code_sessions: NamedDependency[CodeSessions],
        code_agent_id: Annotated[UUID | None, QueryParameter(name="codeAgentId")] = None,
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> CodeSessionListOut:
        rows, more = await code_sessions.page(
            principal_of(request),
            before=read_cursor(cursor),
            limit=limit,
            code_agent_id=code_agent_id,
        )
        return CodeSessionListOut(
            sessions=[CodeSessionOut.of(s) for s in rows],
            next_cursor=cursor_text(rows[-1].created_at, rows[-1].id) if more else None,
        )

    @post(
        "/",
        operation_id="createCodeSession",
        status_code=201,
        responses=errors(400, 404, 413, 415, 422),
        summary="Start a code session (it runs in the background: pending first)",
    )
    async def start(
        self,
        request: Req,
        code_sessions: NamedDependency[CodeSessions],
        data: JSONBody[CodeSessionBody],
    ) -> CodeSessionOut:
        draft = draft_of(data, SessionDraft)
        return CodeSessionOut.of(await code_sessions.start(principal_of(request), draft))

    @get(
        "/{session_id:uuid}",
        operation_id="getCodeSession",
        responses=errors(404),
        summary="A code session",
    )
    async def get_session(
        self, request: Req, code_sessions: NamedDependency[CodeSessions], session_id: FromPath[UUID]
    ) -> CodeSessionOut:
        return CodeSessionOut.of(await code_sessions.get(principal_of(request), session_id))

    @patch(
        "/{session_id:uuid}",
        operation_id="updateCodeSession",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the session's title",
    )
    async def retitle(
        self,
        request: Req,
        code_sessions: NamedDependency[CodeSessions],
        session_id: FromPath[UUID],
        data: JSONBody[TitleBody],
    ) -> CodeSessionOut:
        session = await code_sessions.retitle(principal_of(request), session_id, data.title)
        return CodeSessionOut.of(session)

    @post(
        "/{session_id:uuid}/messages",
        operation_id="sendCodeSessionMessage",
        status_code=200,
        responses=errors(400, 404, 409, 413, 415, 422),
        summary="A follow-up: queued while the session runs, answered when it waits"
        " (409 SESSION_ENDED once it has ended)",
    )
    async def send(
        self,
        request: Req,
        code_sessions: NamedDependency[CodeSessions],
        session_id: FromPath[UUID],
        data: JSONBody[MessageBody],
    ) -> CodeSessionOut:
        session = await code_sessions.send(principal_of(request), session_id, data.content)
        return CodeSessionOut.of(session)

    @post(
        "/{session_id:uuid}/cancel",
        operation_id="cancelCodeSession",
        status_code=200,
        responses=errors(404),
        summary="Cancel the session (idempotent); a command in flight is stopped",
    )
    async def cancel(
        self, request: Req, code_sessions: NamedDependency[CodeSessions], session_id: FromPath[UUID]
    ) -> CodeSessionOut:
        return CodeSessionOut.of(await code_sessions.cancel(principal_of(request), session_id))

    @post(
        "/{session_id:uuid}/archive",
        operation_id="archiveCodeSession",
        status_code=200,
        responses=errors(404, 409),
        summary="Delete the session's sandbox and stored key; its timeline stays"
        " (409 SESSION_RUNNING while it runs: cancel it first)",
    )
    async def archive(
        self, request: Req, code_sessions: NamedDependency[CodeSessions], session_id: FromPath[UUID]
    ) -> CodeSessionOut:
        return CodeSessionOut.of(await code_sessions.archive(principal_of(request), session_id))

    @get(
        "/{session_id:uuid}/events",
        operation_id="listCodeSessionEvents",
        responses=errors(404, 422),
        response_description="The timeline's events after ``after``, oldest first; with"
        " Accept: text/event-stream, the same followed live as Server-Sent Events (id: seq)",
        summary="The session's timeline, oldest first; or followed live over SSE",
    )
    async def events(
        self,
        request: Req,
        code_sessions: NamedDependency[CodeSessions],
        session_id: FromPath[UUID],
        after: After = 0,
        limit: EventLimit = 100,
        last_event_id: LastEventId = "",
    ) -> Response[SessionEventsOut]:
        who = principal_of(request)
        if wants_live(request):
            start = resume_from(last_event_id, after)
            keepalive = request.app.state.sse_keepalive_s
            feed = await code_sessions.follow(who, session_id, start, keepalive)
            return followed(feed, SessionEventOut)  # type: ignore[no-any-return]
        rows, next_after = await code_sessions.events(who, session_id, after=after, limit=limit)
        return Response(
            SessionEventsOut(events=[SessionEventOut.of(e) for e in rows], next_after=next_after)
        )
