"""Code sessions as their users see them: ``/api/code-sessions`` (GET, POST),
``/api/code-sessions/{id}`` (GET, PATCH), ``.../messages``, ``.../events``,
``.../cancel`` and ``.../archive`` (docs/code-agents.md).

Starting a session stores it ``pending`` with its first events and queues the
job that runs it (``engine.CodeSessionEngine``); everything later is the job's.
A follow-up is queued on the session; when the session waits for its user, the
job is queued again to answer it. A cancel of a session no job works on ends it
at once; otherwise the job sees the flag at its next check."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.code_session import (
    CodeSession,
    SessionEvent,
    SessionUsage,
    SessionWork,
    Turn,
)
from agentsvc_core.errors import Conflict, InvalidInput
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.code_sessions import CodeSessionStore, NewEvent
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.sandboxes import SandboxProvider
from agentsvc_core.rules import check_text
from agentsvc_core.use_cases.code_sessions.agents import (
    check_ref,
    check_repo_url,
    credential_context,
)
from agentsvc_core.use_cases.code_sessions.timeline import Timeline
from agentsvc_core.use_cases.code_sessions.transitions import (
    archived,
    cancel_asked,
    followed_up,
)

__all__ = [
    "EXPIRE_JOB",
    "RUN_JOB",
    "CodeSessions",
    "SessionDraft",
    "SessionJob",
    "session_context",
]

RUN_JOB = "code_session.run"
EXPIRE_JOB = "code_session.expire"
MAX_PROMPT = 100_000
MAX_TITLE = 200


class SessionJob(msgspec.Struct, frozen=True):
    """The jobs' payload: ids only."""

    org_id: str
    session_id: UUID


class SessionDraft(msgspec.Struct, frozen=True, kw_only=True):
    code_agent_id: UUID
    prompt: str
    repo_url: str | None = None
    ref: str | None = None
    title: str | None = None


def session_context(org_id: str, session_id: UUID) -> str:
    return f"code-session:{org_id}:{session_id}"


def _title(prompt: str) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else "code session"
    return first[:MAX_TITLE]


async def queue_run(jobs: JobQueue, session: CodeSession, why: str) -> None:
    """Queue the session's job; ``why`` makes the key (a job that runs meanwhile
    holds the session's lease, so two never work on it at once)."""
    payload = msgspec.json.encode(SessionJob(session.org_id, session.id))
    await jobs.enqueue(RUN_JOB, payload, key=f"code-session:{session.id}:{why}")


class CodeSessions:
    def __init__(
        self,
        store: CodeSessionStore,
        timeline: Timeline,
        jobs: JobQueue,
        box: SecretBox,
        clock: Clock,
        providers: Mapping[str, SandboxProvider],
    ) -> None:
        self._store = store
        self._timeline = timeline
        self._jobs = jobs
        self._box = box
        self._clock = clock
        self._providers = providers

    async def start(self, who: Principal, draft: SessionDraft) -> CodeSession:
        agent = await self._store.get_agent(who.org_id, draft.code_agent_id)
        prompt = check_text("prompt", draft.prompt, max_len=MAX_PROMPT, required=True)
        url = draft.repo_url if draft.repo_url is not None else agent.repo_url
        if url is None:
            raise InvalidInput("repoUrl", "required: the code agent names no repository")
        check_repo_url("repoUrl", url)
        ref = check_ref("ref", draft.ref) if draft.ref is not None else agent.starting_ref
        title = _title(prompt)
        if draft.title is not None:
            title = check_text("title", draft.title, max_len=MAX_TITLE, required=True)
        now = self._clock.now()
        session_id = uuid.uuid4()
        sealed = None
        if agent.git_credential_sealed is not None:
            # the session's own copy: archiving the session deletes it, and a
            # change of the code agent's credential leaves a running session be
            token = self._box.open(
                agent.git_credential_sealed, credential_context(who.org_id, agent.id)
            )
            sealed = self._box.seal(token, session_context(who.org_id, session_id))
        work = SessionWork(
            model=agent.model,
            preamble=agent.preamble,
            branch_prefix=agent.branch_prefix,
            auto_create_pr=agent.auto_create_pr,
            computer=agent.computer,
            credential_sealed=sealed,
            transcript=(Turn(role="user", content=prompt),),
            trace_id=uuid.uuid4().hex,
        )
        session = CodeSession(
            id=session_id,
            org_id=who.org_id,
            code_agent_id=agent.id,
            status="pending",
            title=title,
            prompt=prompt,
            repo_url=url,
            ref=ref,
            branch=None,
            pr_url=None,
            usage=SessionUsage(),
            error=None,
            last_event_seq=0,
            archived=False,
            work=work,
            created_at=now,
            updated_at=now,
        )
        stored, _ = await self._store.add_session(
            session,
            [
                NewEvent("status", {"status": "pending"}),
                NewEvent("message", {"role": "user", "content": prompt}),
            ],
        )
        await queue_run(self._jobs, stored, "start")
        return stored

    async def page(
        self,
        who: Principal,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
        code_agent_id: UUID | None = None,
    ) -> tuple[list[CodeSession], bool]:
        rows = await self._store.sessions(
            who.org_id, before=before, limit=limit + 1, code_agent_id=code_agent_id
        )
        return rows[:limit], len(rows) > limit

    async def get(self, who: Principal, session_id: UUID) -> CodeSession:
        return await self._store.get_session(who.org_id, session_id)

    async def retitle(self, who: Principal, session_id: UUID, title: str) -> CodeSession:
        title = check_text("title", title, max_len=MAX_TITLE, required=True)
        now = self._clock.now()

        def change(s: CodeSession) -> tuple[CodeSession, list[NewEvent]]:
            return msgspec.structs.replace(s, title=title, updated_at=now), []

        session, _ = await self._store.change(who.org_id, session_id, change)
        return session

    async def send(self, who: Principal, session_id: UUID, content: str) -> CodeSession:
        """A follow-up: 409 ``SESSION_ENDED`` on a session that ended."""
        content = check_text("content", content, max_len=MAX_PROMPT, required=True)
        now = self._clock.now()
        session, events = await self._timeline.change(
            who.org_id, session_id, lambda s: followed_up(s, content, now)
        )
        if not events:
            raise Conflict(f"the session has ended ({session.status})", code="SESSION_ENDED")
        if session.status == "awaiting_input":
            await queue_run(self._jobs, session, f"message-{session.last_event_seq}")
        return session

    async def cancel(self, who: Principal, session_id: UUID) -> CodeSession:
        """Idempotent: the session as it is after (a cancelled one stays so)."""
        now = self._clock.now()
        session, events = await self._timeline.change(
            who.org_id, session_id, lambda s: cancel_asked(s, now)
        )
        if events and session.ended and session.work.sandbox_ref is not None:
            await queue_run(self._jobs, session, "cancelled")  # the job stops the sandbox
        return session

    async def archive(self, who: Principal, session_id: UUID) -> CodeSession:
        """Destroys the sandbox and deletes the stored key; the timeline stays.
        409 ``SESSION_RUNNING`` while a job works on it (cancel it first)."""
        session = await self._store.get_session(who.org_id, session_id)
        if session.status in ("creating", "running"):
            raise Conflict(
                "the session is running; cancel it before archiving", code="SESSION_RUNNING"
            )
        work = session.work
        if work.sandbox_ref is not None and not work.sandbox_gone and work.provider:
            provider = self._providers.get(work.provider)
            if provider is not None:
                await provider.destroy(work.sandbox_ref)  # idempotent
        now = self._clock.now()
        session, events = await self._timeline.change(
            who.org_id, session_id, lambda s: archived(s, now)
        )
        if not events and session.status in ("creating", "running"):
            raise Conflict(
                "the session is running; cancel it before archiving", code="SESSION_RUNNING"
            )
        return session

    async def events(
        self, who: Principal, session_id: UUID, *, after: int, limit: int
    ) -> tuple[list[SessionEvent], int | None]:
        """A page of the timeline, oldest first, and the ``after`` of the next page
        (None: nothing more for now)."""
        await self._store.get_session(who.org_id, session_id)
        return await self._timeline.page(who.org_id, session_id, after=after, limit=limit)

    async def follow(
        self, who: Principal, session_id: UUID, after: int, keepalive_s: float
    ) -> AsyncIterator[list[SessionEvent] | None]:
        """The timeline live (``Timeline.follow``), after checking the session is
        the caller's organization's (``NotFound`` otherwise, before the stream)."""
        await self._store.get_session(who.org_id, session_id)
        return self._timeline.follow(who.org_id, session_id, after, keepalive_s)
