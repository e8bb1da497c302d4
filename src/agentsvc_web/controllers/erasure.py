"""A user's data: erasure and export (docs/privacy.md). Admins only. A thread's
deletion is a route of the threads (``controllers/threads.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get
from litestar.di import NamedDependency
from litestar.params import PathParameter

from agentsvc_core.entities import Message
from agentsvc_core.rules import MAX_USER_ID
from agentsvc_core.use_cases.erasure import (
    Erasure,
    GrantExport,
    ThreadExport,
    UserErasure,
    UserExport,
)
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.memories import MemoryOut
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import ThreadOut, copied

Req = Request[Any, Any, Any]

UserId = Annotated[str, PathParameter(min_length=1, max_length=MAX_USER_ID)]


class UserErasureOut(msgspec.Struct):
    """What was removed, by kind; a second erasure answers zeros."""

    user_id: str
    threads: int
    visitor_sessions: int
    memories: int
    oauth_grants: int
    participations: int

    @classmethod
    def of(cls, e: UserErasure) -> UserErasureOut:
        return copied(cls, e)


class ExportedMessageOut(msgspec.Struct):
    """A user or assistant message, of whichever branch (``parent_id``: the message it
    follows once its thread has branches)."""

    id: UUID
    role: str
    content: str
    sender_name: str | None
    sender_id: str | None
    status: str
    parent_id: UUID | None
    created_at: datetime

    @classmethod
    def of(cls, m: Message) -> ExportedMessageOut:
        return copied(cls, m)


class ExportedThreadOut(msgspec.Struct):
    thread: ThreadOut
    messages: list[ExportedMessageOut]  # every branch's, in the order stored

    @classmethod
    def of(cls, t: ThreadExport) -> ExportedThreadOut:
        return cls(
            thread=ThreadOut.of(t.thread), messages=[ExportedMessageOut.of(m) for m in t.messages]
        )


class ExportedGrantOut(msgspec.Struct):
    """An OAuth grant by where it applies; its tokens stay sealed, never exported."""

    kind: Literal["mcp", "managed"]
    mcp_id: str | None
    provider: str | None
    expires_at: datetime | None

    @classmethod
    def of(cls, g: GrantExport) -> ExportedGrantOut:
        return copied(cls, g)


class ExportedVisitorSessionOut(msgspec.Struct):
    thread_id: UUID
    agent_id: UUID
    identified: bool
    created_at: datetime


class UserExportOut(msgspec.Struct):
    user_id: str
    exported_at: datetime
    threads: list[ExportedThreadOut]
    memories: list[MemoryOut]
    oauth_grants: list[ExportedGrantOut]
    visitor_sessions: list[ExportedVisitorSessionOut]

    @classmethod
    def of(cls, x: UserExport) -> UserExportOut:
        return cls(
            user_id=x.user_id,
            exported_at=x.exported_at,
            threads=[ExportedThreadOut.of(t) for t in x.threads],
            memories=[MemoryOut.of(m) for m in x.memories],
            oauth_grants=[ExportedGrantOut.of(g) for g in x.oauth_grants],
            visitor_sessions=[copied(ExportedVisitorSessionOut, v) for v in x.visitor_sessions],
        )


class UserDataController(Controller):
    path = "/api/users/{user_id:str}"
    tags = ["privacy"]

    @delete(
        "/data",
        operation_id="eraseUserData",
        opt=ADMIN,
        status_code=200,
        responses=errors(400, 403, 409, 422),
        summary=(
            "Erase a user: their threads, user-scoped memories, OAuth grants and visitor"
            " sessions; answers what it removed (zeros the second time)"
        ),
    )
    async def erase(
        self, request: Req, erasure: NamedDependency[Erasure], user_id: UserId
    ) -> UserErasureOut:
        return UserErasureOut.of(await erasure.erase_user(principal_of(request), user_id))

    @get(
        "/export",
        operation_id="exportUserData",
        opt=ADMIN,
        responses=errors(400, 403, 422),
        summary="Everything stored about a user, as one JSON document (no secret)",
    )
    async def export(
        self, request: Req, erasure: NamedDependency[Erasure], user_id: UserId
    ) -> UserExportOut:
        return UserExportOut.of(await erasure.export_user(principal_of(request), user_id))
