"""An agent's memories (``/api/agents/{id}/memory``, ``/api/agents/{id}/memories``);
docs/api.md#memories.

The configuration is read by members and written by admins (the default). The
list is a read; the recall (``POST .../memory``) is a read made with a body, so a
``MEMBER`` route; the add by hand, the edit and the delete need an admin. What a
caller sees is the use case's (``use_cases/memories/memories.py``): an API key every
memory, a JWT user the agent scope and its own user scope.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.memory import Memory, MemoryScope, MemoryStatus
from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.memories.memories import (
    MAX_CONTENT,
    MAX_KEY,
    MAX_MEMORIES,
    MAX_QUERY,
    MAX_SCOPE_ID,
    MAX_TOP_K,
    Memories,
    MemoryConfig,
    MemorySettings,
)
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, copied, cursor_text, read_cursor

Req = Request[Any, Any, Any]


class MemoryConfigBody(msgspec.Struct, rename="camel"):
    enabled: bool | UnsetType = UNSET
    scopes: Annotated[list[MemoryScope], Meta(min_length=1, max_length=3)] | UnsetType = UNSET
    max_memories: Annotated[int, Meta(ge=1, le=MAX_MEMORIES)] | UnsetType = UNSET
    auto_collect: bool | UnsetType = UNSET


class RecallBody(msgspec.Struct, rename="camel"):
    query: Annotated[str, Meta(min_length=1, max_length=MAX_QUERY)]
    top_k: Annotated[int, Meta(ge=1, le=MAX_TOP_K)] = 5
    scope: MemoryScope | None = None
    scope_id: Annotated[str, Meta(max_length=200)] | None = None


class MemoryBody(msgspec.Struct, rename="camel"):
    content: Annotated[str, Meta(min_length=1, max_length=MAX_CONTENT)]
    scope: MemoryScope = "agent"
    scope_id: Annotated[str, Meta(min_length=1, max_length=MAX_SCOPE_ID)] | None = None
    key: Annotated[str, Meta(max_length=MAX_KEY)] | None = None


class MemoryEditBody(msgspec.Struct, rename="camel"):
    content: Annotated[str, Meta(min_length=1, max_length=MAX_CONTENT)]


class MemoryConfigOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    enabled: bool
    scopes: list[MemoryScope]
    max_memories: int
    auto_collect: bool

    @classmethod
    def of(cls, c: MemoryConfig) -> MemoryConfigOut:
        return copied(cls, c, scopes=list(c.scopes))


class MemoryOut(msgspec.Struct):
    id: UUID
    org_id: str
    agent_id: UUID
    scope: MemoryScope
    scope_id: str | None
    content: str
    key: str | None
    status: MemoryStatus
    superseded_by: UUID | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return copied(cls, m)


class ScoredMemoryOut(MemoryOut):
    score: float


class MemoryListOut(msgspec.Struct, rename="camel"):
    memories: list[MemoryOut]
    next_cursor: str | None


class RecallOut(msgspec.Struct):
    memories: list[ScoredMemoryOut]


class AgentMemoryController(Controller):
    path = "/api/agents/{agent_id:uuid}"
    tags = ["memories"]

    @get(
        "/memory",
        operation_id="getAgentMemory",
        responses=errors(404),
        summary="The agent's memory configuration (whether the model gets the memory tools)",
    )
    async def get_config(
        self,
        request: Req,
        memory_settings: NamedDependency[MemorySettings],
        agent_id: FromPath[UUID],
    ) -> MemoryConfigOut:
        return MemoryConfigOut.of(await memory_settings.get(principal_of(request), agent_id))

    @put(
        "/memory",
        operation_id="putAgentMemory",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied memory settings",
    )
    async def put_config(
        self,
        request: Req,
        memory_settings: NamedDependency[MemorySettings],
        agent_id: FromPath[UUID],
        data: JSONBody[MemoryConfigBody],
    ) -> MemoryConfigOut:
        config = await memory_settings.update(principal_of(request), agent_id, given_fields(data))
        return MemoryConfigOut.of(config)

    @post(
        "/memory",
        operation_id="recallMemories",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 404, 413, 415, 422),
        summary="Search the agent's active memories, best first",
    )
    async def recall(
        self,
        request: Req,
        memories: NamedDependency[Memories],
        agent_id: FromPath[UUID],
        data: JSONBody[RecallBody],
    ) -> RecallOut:
        found = await memories.recall(
            principal_of(request), agent_id, data.query, data.top_k, data.scope, data.scope_id
        )
        return RecallOut(memories=[copied(ScoredMemoryOut, m, score=score) for m, score in found])

    @get(
        "/memories",
        operation_id="listMemories",
        responses=errors(404, 422),
        summary="The agent's memories, newest first, by pages",
    )
    async def list_memories(
        self,
        request: Req,
        memories: NamedDependency[Memories],
        agent_id: FromPath[UUID],
        scope_filter: Annotated[MemoryScope | None, QueryParameter(name="scope")] = None,
        status: Annotated[MemoryStatus | None, QueryParameter(name="status")] = None,
        cursor: Annotated[str | None, QueryParameter(name="cursor", max_length=100)] = None,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=100)] = 50,
    ) -> MemoryListOut:
        page = await memories.page(
            principal_of(request),
            agent_id,
            scope=scope_filter,
            status=status,
            cursor=read_cursor(cursor),
            limit=limit,
        )
        return MemoryListOut(
            memories=[MemoryOut.of(m) for m in page.memories],
            next_cursor=None if page.next_cursor is None else cursor_text(*page.next_cursor),
        )

    @post(
        "/memories",
        operation_id="addMemory",
        status_code=201,
        responses={
            200: ResponseSpec(
                data_container=MemoryOut,
                description="The same fact was in that scope already: the stored memory",
                generate_examples=False,
            ),
            **errors(400, 403, 404, 413, 415, 422),
        },
        summary="Add a memory by hand, as the model's memory_save would",
    )
    async def add_memory(
        self,
        request: Req,
        memories: NamedDependency[Memories],
        agent_id: FromPath[UUID],
        data: JSONBody[MemoryBody],
    ) -> Response[MemoryOut]:
        saved = await memories.add(
            principal_of(request), agent_id, data.scope, data.scope_id, data.content, data.key
        )
        assert saved.memory is not None
        return Response(
            MemoryOut.of(saved.memory), status_code=201 if saved.outcome == "saved" else 200
        )

    @patch(
        "/memories/{memory_id:uuid}",
        operation_id="editMemory",
        responses=errors(400, 403, 404, 409, 413, 415, 422),
        summary="Change a memory's content (recall finds its new words)",
    )
    async def edit_memory(
        self,
        request: Req,
        memories: NamedDependency[Memories],
        agent_id: FromPath[UUID],
        memory_id: FromPath[UUID],
        data: JSONBody[MemoryEditBody],
    ) -> MemoryOut:
        edited = await memories.edit(principal_of(request), agent_id, memory_id, data.content)
        return MemoryOut.of(edited)

    @delete(
        "/memories/{memory_id:uuid}",
        operation_id="deleteMemory",
        status_code=200,
        responses=errors(404),
        summary="Delete a memory",
    )
    async def delete_memory(
        self,
        request: Req,
        memories: NamedDependency[Memories],
        agent_id: FromPath[UUID],
        memory_id: FromPath[UUID],
    ) -> OkBody:
        await memories.delete(principal_of(request), agent_id, memory_id)
        return OkBody(ok=True)
