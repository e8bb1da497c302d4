"""What a thread's next turn would send, and compacting it now
(``/api/threads/{id}/context``, ``/api/threads/{id}/compact``; docs/compaction.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath

from agentsvc_core.entities import Message
from agentsvc_core.use_cases.turn.thread_context import (
    Compacted,
    ThreadCompaction,
    ThreadContext,
)
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied

__all__ = ["CompactedOut", "ContextMessageOut", "ThreadContextController", "ThreadContextOut"]

Req = Request[Any, Any, Any]


class ContextToolCallOut(msgspec.Struct):
    id: str
    name: str
    arguments: dict[str, Any]


class ContextMessageOut(msgspec.Struct):
    id: UUID
    role: str
    content: str
    tool_calls: list[ContextToolCallOut]
    tool_call_id: str | None
    sender_name: str | None
    created_at: datetime

    @classmethod
    def of(cls, m: Message) -> ContextMessageOut:
        calls = [
            ContextToolCallOut(id=c.id, name=c.name, arguments=c.arguments) for c in m.tool_calls
        ]
        return copied(cls, m, tool_calls=calls)


class ThreadContextOut(msgspec.Struct):
    model: str
    system: str
    messages: list[ContextMessageOut]
    tokens: int
    summary: str | None
    summarised_through: UUID | None

    @classmethod
    def of(cls, c: ThreadContext) -> ThreadContextOut:
        return copied(cls, c, messages=[ContextMessageOut.of(m) for m in c.messages])


class CompactedOut(msgspec.Struct):
    compacted: bool
    tokens_before: int
    tokens_after: int
    kind: Literal["native", "summary"]

    @classmethod
    def of(cls, c: Compacted) -> CompactedOut:
        return copied(cls, c)


class ThreadContextController(Controller):
    path = "/api/threads"
    tags = ["threads"]

    @get(
        "/{thread_id:uuid}/context",
        operation_id="getThreadContext",
        responses=errors(403, 404, 422),
        summary="The system prompt and messages the next turn would send, with a token estimate",
    )
    async def get_context(
        self,
        request: Req,
        thread_compaction: NamedDependency[ThreadCompaction],
        thread_id: FromPath[UUID],
    ) -> ThreadContextOut:
        found = await thread_compaction.context(principal_of(request), thread_id)
        return ThreadContextOut.of(found)

    @post(
        "/{thread_id:uuid}/compact",
        operation_id="compactThread",
        opt=MEMBER,
        status_code=200,
        responses=errors(403, 404, 409, 422),
        summary="Summarise the thread's older messages now (409 while a reply runs)",
    )
    async def compact(
        self,
        request: Req,
        thread_compaction: NamedDependency[ThreadCompaction],
        thread_id: FromPath[UUID],
    ) -> CompactedOut:
        done = await thread_compaction.compact(principal_of(request), thread_id)
        return CompactedOut.of(done)
