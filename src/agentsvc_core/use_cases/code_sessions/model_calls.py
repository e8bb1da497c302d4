"""A code session's model calls: the code agent's model and preamble through the
model router (the platform's key: a code agent belongs to no agent whose
resolver could name a user's), the transcript as messages, the tools offered;
what it answered recorded on the session with its usage, cost and span, then
counted for analytics as a usage record (``purpose`` ``code_session``: its
``agent_id`` is the code agent's, its ``thread_id`` and ``run_id`` the
session's)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Protocol

from agentsvc_core.entities import Message, ToolCall, Usage, UsageRecord
from agentsvc_core.entities.code_session import CodeSession, SessionUsage, Turn
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock, ModelRouter
from agentsvc_core.ports.code_sessions import NewEvent
from agentsvc_core.ports.llm import ModelRequest, TextDelta, ToolCallRequested, UsageReport
from agentsvc_core.pricing import PriceTable
from agentsvc_core.use_cases.code_sessions import transitions as t
from agentsvc_core.use_cases.code_sessions.creating import Apply
from agentsvc_core.use_cases.code_sessions.finish import span
from agentsvc_core.use_cases.code_sessions.tools import TOOL_SPECS

__all__ = ["ModelCalls", "UsageSink", "system_prompt"]

log = logging.getLogger("agentsvc.code_sessions")


class UsageSink(Protocol):
    """Where a session's model calls are counted for analytics (the usage records
    every model call writes; ``ConversationStore.add_usage``)."""

    async def add_usage(self, records: list[UsageRecord]) -> None: ...


class ModelCalls:
    def __init__(
        self,
        router: ModelRouter,
        clock: Clock,
        prices: PriceTable | None,
        usage: UsageSink | None,
        max_tokens: int,
    ) -> None:
        self._router = router
        self._clock = clock
        self._prices = prices
        self._usage = usage
        self._max_tokens = max_tokens

    async def call(self, session: CodeSession, apply: Apply) -> None:
        """One model call with the session's transcript; its answer, usage and
        span recorded (then counted for analytics)."""
        work = session.work
        chat, name = self._router.route(work.model)
        request = ModelRequest(
            model=name,
            system=system_prompt(work.preamble),
            messages=_messages(session),
            tools=list(TOOL_SPECS),
            max_tokens=self._max_tokens,
        )
        started = self._clock.now()
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage()
        stream = chat.stream(request)
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, ToolCallRequested):
                    calls.append(event.call)
                elif isinstance(event, UsageReport):
                    usage = usage + event.usage
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        ended = self._clock.now()
        cost = self._prices.cost(work.model, usage) if self._prices is not None else None
        said = "".join(text)
        turn = Turn(role="assistant", content=said, tool_calls=tuple(calls))
        events: list[NewEvent] = []
        if said:
            events.append(NewEvent("message", {"role": "assistant", "content": said}))
        events += [
            NewEvent("tool_call", {"call_id": c.id, "name": c.name, "arguments": c.arguments})
            for c in calls
        ]
        events.append(
            NewEvent(
                "usage",
                {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cost_usd": cost,
                },
            )
        )
        spent = SessionUsage(
            tokens=usage.total_tokens,
            cost_usd=cost or 0.0,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
        trace = span(
            f"chat {work.model}",
            "llm",
            started,
            ended,
            attributes={"gen_ai.request.model": work.model},
            model=work.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost,
        )
        await apply(
            session,
            lambda s: t.recorded(
                s,
                ended,
                events,
                turns=[turn],
                usage=spent,
                model_calls=s.work.model_calls + 1,
                attempts=0,
                spans=(*s.work.spans, trace),
            ),
        )
        await self._count(session, chat.provider, usage, cost, ended)

    async def _count(
        self, session: CodeSession, provider: str, usage: Usage, cost: float | None, at: datetime
    ) -> None:
        if self._usage is None:
            return
        record = UsageRecord(
            id=uuid.uuid4(),
            org_id=session.org_id,
            agent_id=session.code_agent_id,
            thread_id=session.id,
            run_id=session.id,
            message_id=None,
            provider=provider,
            model=session.work.model,
            usage=usage,
            key_source="platform",
            metadata={"code_session_id": str(session.id)},
            created_at=at,
            cost_usd=cost,
            purpose="code_session",
        )
        try:
            await self._usage.add_usage([record])
        except DomainError as exc:
            log.warning("the usage of code session %s was not stored: %s", session.id, exc.detail)


def system_prompt(preamble: str) -> str:
    base = (
        "You work in a sandbox holding a git repository checked out at its root. Use the"
        " tools to read, change and test it. Ask the user with ask_user only when you"
        " cannot go on without an answer. When you are done, answer with a short summary"
        " of what you changed: it becomes the pull request's description."
    )
    return f"{preamble}\n\n{base}" if preamble else base


def _messages(session: CodeSession) -> list[Message]:
    """The transcript as the model reads it; a tool's result names its tool (as a
    thread's does: the sender of a ``tool`` message)."""
    at = session.created_at
    transcript = session.work.transcript
    names = {c.id: c.name for turn in transcript for c in turn.tool_calls}
    return [
        Message(
            id=uuid.UUID(int=i + 1),
            org_id=session.org_id,
            thread_id=session.id,
            role=turn.role,
            content=turn.content,
            created_at=at,
            sender_name=names.get(turn.tool_call_id) if turn.tool_call_id else None,
            tool_calls=turn.tool_calls,
            tool_call_id=turn.tool_call_id,
        )
        for i, turn in enumerate(transcript)
    ]
