"""The job that runs a code session (``RUN_JOB``), step by step, each step's
outcome recorded on the session (``transitions``, one atomic write with its
events) before the next acts on it:

1. ``pending`` -> ``creating``: a sandbox is started (its ref recorded at once),
   the repository fetched (``GitRemote.fetch``) and its files written into the
   sandbox, each file's sha1 kept;
2. ``running``: the model is called with the transcript; its answer (text, tool
   calls, usage) is recorded; then each tool call is run, its result recorded;
   ``ask_user`` makes the session ``awaiting_input`` (the job ends; a follow-up
   queues it again, and its content is the tool's answer);
3. the model's final answer: follow-ups queued meanwhile go to the model first;
   then the changed files are read back (``finish.changed_files``), pushed as one
   commit on the new branch ``<branch_prefix><first 8 of the id>``, and a pull
   request opened when the code agent says so: ``finished``.

A killed process: the queue runs the job again once its heartbeat is stale, and
it goes on from the last recorded step. A tool call recorded as started whose
result was not recorded is run again only when that is safe
(``tools.SAFE_AGAIN``); an ``exec`` or ``edit`` is reported to the model as
interrupted instead. A push is safe again (the port answers the same branch as the
first time), and so is opening the pull request (the host answers the open one).

One job works on a session at a time: it holds a lease on the session, renewed
while it works; a second job (a follow-up queued meanwhile) waits with ``Again``
until the lease is free or has run out (a killed process's)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from agentsvc_core.entities import ToolCall
from agentsvc_core.entities.code_session import CodeSession, Turn
from agentsvc_core.errors import DomainError, NotFound
from agentsvc_core.ports import Clock, ModelRouter, SecretBox, TraceStore
from agentsvc_core.ports.code_sessions import Change, CodeSessionStore, NewEvent
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.ports.git_remotes import GitHost, GitRemote, Snapshot
from agentsvc_core.ports.jobs import Again, JobQueue
from agentsvc_core.ports.sandboxes import SandboxProvider
from agentsvc_core.pricing import PriceTable
from agentsvc_core.use_cases.code_sessions import transitions as t
from agentsvc_core.use_cases.code_sessions.creating import Creating, Failure
from agentsvc_core.use_cases.code_sessions.finish import session_trace, span
from agentsvc_core.use_cases.code_sessions.handing_back import HandingBack
from agentsvc_core.use_cases.code_sessions.model_calls import ModelCalls, UsageSink
from agentsvc_core.use_cases.code_sessions.sessions import EXPIRE_JOB, SessionJob
from agentsvc_core.use_cases.code_sessions.timeline import Timeline
from agentsvc_core.use_cases.code_sessions.tools import (
    ASK_USER,
    SAFE_AGAIN,
    Workspace,
)
from agentsvc_core.use_cases.event_webhooks.payloads import code_session_data

__all__ = ["CodeSessionEngine", "EngineSettings", "UsageSink"]

log = logging.getLogger("agentsvc.code_sessions")
_job = msgspec.json.Decoder(SessionJob)
BUSY_RETRY_S = 2.0
SEATS_RETRY_S = 5.0  # this process already works on ``max_running`` sessions
DEFECT = "the session failed (an internal error; see the logs)"
INTERRUPTED = (
    "interrupted: the service restarted while this ran, and its effects are unknown;"
    " check the workspace before running it again"
)


class EngineSettings(msgspec.Struct, frozen=True, kw_only=True):
    stale_after: timedelta = timedelta(seconds=60)  # a lease not renewed for this long is free
    expire_after: timedelta = timedelta(hours=24)  # waiting for the user at most this long
    max_model_calls: int = 200
    max_tokens: int = 8192
    default_provider: str | None = None  # None: the first of ``providers``
    author: str = "agentsvc <agentsvc@localhost>"
    trace_retention: timedelta = timedelta(days=30)
    retry_s: float = 5.0  # the first wait after a transient git failure (doubling)
    max_attempts: int = 5
    # sessions one process works on at once: each holds a job slot while it runs,
    # so the others (documents, deliveries, channels) keep theirs
    max_running: int = 2


Step = Literal["go", "wait", "done"]


class CodeSessionEngine:
    def __init__(
        self,
        store: CodeSessionStore,
        timeline: Timeline,
        jobs: JobQueue,
        box: SecretBox,
        clock: Clock,
        router: ModelRouter,
        providers: Mapping[str, SandboxProvider],
        remote: GitRemote,
        hosts: Sequence[GitHost],
        *,
        usage: UsageSink | None = None,
        traces: TraceStore | None = None,
        prices: PriceTable | None = None,
        settings: EngineSettings | None = None,
        events: EventPublisher | None = None,
    ) -> None:
        """``events``: told when a session ends (event webhooks), once."""
        self._events = events or NoEvents()
        self._store = store
        self._timeline = timeline
        self._jobs = jobs
        self._clock = clock
        self._providers = providers
        self._traces = traces
        self._settings = settings or EngineSettings()
        self._running = 0  # sessions this process works on now
        # the checked-out files of the sessions this process created, for the final
        # diffs (a session taken over after a restart fetches its base again)
        self._snapshots: dict[Any, Snapshot] = {}
        self._models = ModelCalls(router, clock, prices, usage, self._settings.max_tokens)
        self._creating = Creating(
            box, clock, providers, remote, self._settings.default_provider, self._snapshots
        )
        self._handing = HandingBack(
            box, clock, remote, hosts, self._settings.author, self._snapshots
        )

    # --- the jobs -------------------------------------------------------------------

    async def run(self, payload: bytes) -> Again | None:
        """``RUN_JOB``: take the session as far as it goes now."""
        job = _job.decode(payload)
        try:
            session = await self._store.get_session(job.org_id, job.session_id)
        except NotFound:
            return None
        if session.ended:
            await self._ended(session)
            return None
        if self._running >= self._settings.max_running:
            # the job gives its slot back at once and comes again: a worker's
            # slots are never all held by long sessions
            return Again(SEATS_RETRY_S)
        self._running += 1
        try:
            return await self._leased(session)
        finally:
            self._running -= 1

    async def _leased(self, session: CodeSession) -> Again | None:
        owner = uuid.uuid4().hex
        now = self._clock.now()
        session, _ = await self._change(session, self._lease(owner, now))
        if session.work.lease_owner != owner:
            return Again(BUSY_RETRY_S)  # another job works on it: try once it is done
        try:
            async with self._renewing(session, owner):
                return await self._advance(session)
        except Exception:
            if await self._gone(session):
                return None  # its rows went (its organization deleted): nothing to mark
            log.exception("code session %s failed", session.id)
            await self._end(session, "error", DEFECT)
            return None
        finally:
            with contextlib.suppress(DomainError):
                await self._store.change(session.org_id, session.id, lambda s: t.released(s, owner))

    async def expire(self, payload: bytes) -> Again | None:
        """``EXPIRE_JOB``: a session still waiting for its user past the limit."""
        job = _job.decode(payload)
        now = self._clock.now()
        try:
            session, events = await self._timeline.change(
                job.org_id, job.session_id, lambda s: t.expired(s, now, self._settings.expire_after)
            )
        except NotFound:
            return None
        if events:
            await self._ended(session)
        return None

    # --- the loop -------------------------------------------------------------------

    async def _advance(self, session: CodeSession) -> Again | None:
        workspace: Workspace | None = None
        while True:
            session = await self._store.get_session(session.org_id, session.id)
            if session.ended:
                await self._ended(session)
                return None
            if session.work.cancel_requested:
                await self._end(session, "cancelled")
                return None
            if session.status != "running":
                went = await self._before_running(session)
                if went != "go":
                    return went
                continue
            if workspace is None:
                resumed = await self._creating.resume(session, self._cancelled(session))
                if isinstance(resumed, Failure):
                    return await self._failure(session, resumed)
                workspace = resumed
            try:
                step = await self._step(session, workspace)
            except DomainError as exc:
                # the model's provider failed (a tool's failure is the model's to
                # read): tried again later, up to ``max_attempts`` in a row
                model_failed = Failure(f"the model call failed: {exc.detail}", False)
                return await self._failure(session, model_failed)
            if step == "wait":
                await self._waiting(session, workspace)
                return None
            if step == "done":
                failed = await self._handing.finish(session, workspace, self._change)
                if failed is not None:
                    return await self._failure(session, failed)
                continue  # ended: its sandbox stopped and its trace stored, above

    async def _before_running(self, session: CodeSession) -> Again | Literal["go"] | None:
        """``pending``, ``creating`` and ``awaiting_input``: "go" once the session
        moved on; None when it waits for its user; ``Again`` after a transient
        failure."""
        now = self._clock.now()
        if session.status == "pending":
            await self._change(session, lambda s: t.moved(s, "creating", now, frm=("pending",)))
            return "go"
        if session.status == "creating":
            failed = await self._creating.create(session, self._change)
            return "go" if failed is None else await self._failure(session, failed)
        if not session.work.queued:
            return None  # awaiting_input: a follow-up queues the job again
        await self._change(session, lambda s: t.moved(s, "running", now, frm=("awaiting_input",)))
        return "go"

    async def _failure(self, session: CodeSession, failure: Failure) -> Again | None:
        """A transient failure waits (up to ``max_attempts``), a permanent one ends
        the session."""
        attempts = session.work.attempts + 1
        if failure.permanent or attempts >= self._settings.max_attempts:
            await self._end(session, "error", failure.detail)
            return None
        now = self._clock.now()
        await self._change(
            session,
            lambda s: t.recorded(
                s,
                now,
                [NewEvent("notice", {"text": f"{failure.detail}; trying again"})],
                attempts=attempts,
            ),
        )
        return Again(self._settings.retry_s * 2 ** (attempts - 1))

    async def _step(self, session: CodeSession, workspace: Workspace) -> Step:
        work = session.work
        pending = _unanswered(work.transcript)
        now = self._clock.now()
        if pending:
            call = pending[0]
            if call.name == ASK_USER:
                if not work.queued:
                    return "wait"
                answer, rest = work.queued[0], work.queued[1:]
                turn = Turn(role="tool", content=answer, tool_call_id=call.id)
                await self._change(
                    session, lambda s: t.recorded(s, now, [], turns=[turn], queued=rest)
                )
                return "go"
            if work.inflight == call.id and call.name not in SAFE_AGAIN:
                turn = Turn(role="tool", content=INTERRUPTED, tool_call_id=call.id)
                notice = NewEvent(
                    "notice", {"text": f"{call.name} interrupted", "call_id": call.id}
                )
                await self._change(
                    session, lambda s: t.recorded(s, now, [notice], turns=[turn], inflight=None)
                )
                return "go"
            await self._tool(session, workspace, call)
            return "go"
        last = work.transcript[-1]
        if last.role == "assistant":  # the final answer
            if not work.queued:
                return "done"
            turns = [Turn(role="user", content=q) for q in work.queued]
            await self._change(session, lambda s: t.recorded(s, now, [], turns=turns, queued=()))
            return "go"
        if work.model_calls >= self._settings.max_model_calls:
            raise _Stop(f"the model made {work.model_calls} calls without finishing")
        await self._models.call(session, self._change)
        return "go"

    async def _tool(self, session: CodeSession, workspace: Workspace, call: ToolCall) -> None:
        started = self._clock.now()
        await self._change(session, lambda s: t.recorded(s, started, [], inflight=call.id))
        outcome = await workspace.run(call.name, call.arguments)
        ended = self._clock.now()
        turn = Turn(role="tool", content=outcome.content, tool_call_id=call.id)
        events = list(outcome.events)
        if call.name != "exec":
            events.append(
                NewEvent(
                    "tool_result",
                    {
                        "call_id": call.id,
                        "name": call.name,
                        "output": outcome.content[:4000],
                        "is_error": outcome.is_error,
                    },
                )
            )
        trace = span(
            call.name,
            "tool",
            started,
            ended,
            ok=not outcome.is_error,
            attributes={"gen_ai.tool.name": call.name},
            input=call.arguments,
            output=outcome.content[:2000],
        )
        await self._change(
            session,
            lambda s: t.recorded(
                s, ended, events, turns=[turn], inflight=None, spans=(*s.work.spans, trace)
            ),
        )

    # --- waiting and ending ---------------------------------------------------------------

    async def _waiting(self, session: CodeSession, workspace: Workspace) -> None:
        now = self._clock.now()
        session, events = await self._change(session, lambda s: t.waiting(s, now))
        if not events:
            return
        with contextlib.suppress(DomainError):
            await workspace.provider.stop(workspace.ref, workspace.spec)
        payload = msgspec.json.encode(SessionJob(session.org_id, session.id))
        await self._jobs.enqueue(
            EXPIRE_JOB,
            payload,
            key=f"code-session-expire:{session.id}:{session.last_event_seq}",
            delay_s=self._settings.expire_after.total_seconds(),
        )

    async def _end(self, session: CodeSession, to: Any, error: str | None = None) -> None:
        now = self._clock.now()
        session, events = await self._change(session, lambda s: t.ended(s, to, now, error=error))
        if events:
            await self._ended(session)

    async def _ended(self, session: CodeSession) -> None:
        """An ended session's sandbox stopped (its files kept until the archive)
        and its trace stored (once: a second is refused by the store)."""
        self._snapshots.pop(session.id, None)
        await self._events.publish(
            session.org_id,
            "code_session.finished",
            code_session_data(session),
            key=str(session.id),  # the job and a cancel may both end it: one event
        )
        work = session.work
        provider = self._providers.get(work.provider or "")
        if provider is not None and work.sandbox_ref is not None and not work.sandbox_gone:
            spec = self._creating.spec(session)
            with contextlib.suppress(DomainError):
                await provider.stop(work.sandbox_ref, spec)
        if self._traces is None:
            return
        record = session_trace(session, self._clock.now() + self._settings.trace_retention)
        # (refused when stored already: a cancel and the job both ended it)
        with contextlib.suppress(DomainError):
            await self._traces.add_trace(record)

    # --- helpers --------------------------------------------------------------------------

    async def _change(self, session: CodeSession, change: Change) -> tuple[CodeSession, list[Any]]:
        return await self._timeline.change(session.org_id, session.id, change)

    def _lease(self, owner: str, now: datetime) -> Change:
        until = now + self._settings.stale_after
        return lambda s: t.leased(s, owner, now, until)

    async def _gone(self, session: CodeSession) -> bool:
        try:
            await self._store.get_session(session.org_id, session.id)
        except NotFound:
            return True
        return False

    def _cancelled(self, session: CodeSession) -> Any:
        async def asked() -> bool:
            try:
                now = await self._store.get_session(session.org_id, session.id)
            except NotFound:
                return True
            return now.work.cancel_requested or now.ended

        return asked

    @contextlib.asynccontextmanager
    async def _renewing(self, session: CodeSession, owner: str) -> AsyncIterator[None]:
        async def renew() -> None:
            while True:
                await asyncio.sleep(self._settings.stale_after.total_seconds() / 4)
                now = self._clock.now()
                try:
                    await self._store.change(session.org_id, session.id, self._lease(owner, now))
                except DomainError as exc:
                    log.warning(
                        "the lease of code session %s was not renewed: %s", session.id, exc.detail
                    )

        task = asyncio.create_task(renew())
        try:
            yield
        except _Stop as stop:
            await self._end(session, "error", stop.detail)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _Stop(Exception):
    """The session cannot go on (a bound reached): it ends with ``detail``."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _unanswered(transcript: Sequence[Turn]) -> list[ToolCall]:
    """The last assistant turn's tool calls that have no result yet, in order."""
    answered: set[str] = set()
    for turn in reversed(transcript):
        if turn.role == "tool" and turn.tool_call_id is not None:
            answered.add(turn.tool_call_id)
        elif turn.role == "assistant":
            return [c for c in turn.tool_calls if c.id not in answered]
        else:
            return []
    return []
