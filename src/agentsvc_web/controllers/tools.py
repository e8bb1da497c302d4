"""Webhook tools (``/api/tools``), running one (``/api/tools/execute``) and which
agents may use which (``/api/agents/{id}/delegated``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import WebhookTool
from agentsvc_core.use_cases.webhook_tools import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_TIMEOUT_MS,
    MAX_MAX_RESULT_BYTES,
    MAX_TIMEOUT_MS,
    MIN_TIMEOUT_MS,
    DelegatedConfig,
    Execution,
    WebhookToolChanges,
    WebhookToolDraft,
    WebhookTools,
)
from agentsvc_web.auth import principal_of
from agentsvc_web.drafts import draft_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody

Req = Request[Any, Any, Any]
WRITE = errors(400, 404, 409, 413, 415, 422)

ToolName = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
Description = Annotated[str, Meta(max_length=10_000)]
Url = Annotated[str, Meta(min_length=1, max_length=4096)]
Method = Literal["POST", "PUT", "PATCH"]
# header names are checked by the use case (RFC 7230 tokens, not the service's own)
Headers = Annotated[dict[str, Annotated[str, Meta(max_length=8192)]], Meta(max_length=32)]
TimeoutMs = Annotated[int, Meta(ge=MIN_TIMEOUT_MS, le=MAX_TIMEOUT_MS)]
MaxBytes = Annotated[int, Meta(ge=1, le=MAX_MAX_RESULT_BYTES)]
Approval = Literal["never", "always"]


class ToolCreateBody(msgspec.Struct, rename="camel"):
    name: ToolName
    url: Url
    description: Description = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    method: Method = "POST"
    headers: Headers | None = None
    timeout_ms: TimeoutMs = DEFAULT_TIMEOUT_MS
    max_result_bytes: MaxBytes = DEFAULT_MAX_RESULT_BYTES
    approval: Approval = "never"


class ToolPatchBody(msgspec.Struct, rename="camel"):
    name: ToolName | UnsetType = UNSET
    description: Description | UnsetType = UNSET
    parameters: dict[str, Any] | UnsetType = UNSET
    url: Url | UnsetType = UNSET
    method: Method | UnsetType = UNSET
    headers: Headers | UnsetType | None = UNSET  # null removes them
    timeout_ms: TimeoutMs | UnsetType = UNSET
    max_result_bytes: MaxBytes | UnsetType = UNSET
    approval: Approval | UnsetType = UNSET


class ToolOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    description: str
    parameters: dict[str, Any]
    url: str
    method: str
    has_headers: bool
    timeout_ms: int
    max_result_bytes: int
    approval: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, t: WebhookTool) -> ToolOut:
        return cls(
            id=t.id,
            org_id=t.org_id,
            name=t.name,
            description=t.description,
            parameters=t.parameters,
            url=t.url,
            method=t.method,
            has_headers=t.has_headers,
            timeout_ms=t.timeout_ms,
            max_result_bytes=t.max_result_bytes,
            approval=t.approval,
            created_at=t.created_at,
            updated_at=t.updated_at,
        )


class ExecuteBody(msgspec.Struct, rename="camel"):
    name: ToolName
    arguments: dict[str, Any] = {}
    agent_id: UUID | None = None
    thread_id: UUID | None = None


class ExecutionOut(msgspec.Struct):
    ok: bool
    status_code: int | None
    result: Any
    duration_ms: int
    error: str | None

    @classmethod
    def of(cls, e: Execution) -> ExecutionOut:
        return cls(
            ok=e.ok,
            status_code=e.status_code,
            result=e.result,
            duration_ms=e.duration_ms,
            error=e.error,
        )


class DelegatedBody(msgspec.Struct, rename="camel"):
    tool_ids: Annotated[list[UUID], Meta(max_length=128)]


class DelegatedToolOut(msgspec.Struct):
    id: UUID
    name: str


class DelegatedOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    tool_ids: list[UUID]
    tools: list[DelegatedToolOut]  # the delegated tools that exist, by name

    @classmethod
    def of(cls, c: DelegatedConfig, tools: list[WebhookTool]) -> DelegatedOut:
        present = {t.id for t in tools}
        return cls(
            agent_id=c.agent_id,
            org_id=c.org_id,
            tool_ids=[i for i in c.tool_ids if i in present],
            tools=[DelegatedToolOut(id=t.id, name=t.name) for t in tools],
        )


class ToolController(Controller):
    path = "/api/tools"
    tags = ["webhook tools"]

    @get(
        "/",
        operation_id="listTools",
        responses=errors(),
        summary="The organization's webhook tools",
    )
    async def list_tools(
        self, request: Req, webhook_tools: NamedDependency[WebhookTools]
    ) -> list[ToolOut]:
        return [ToolOut.of(t) for t in await webhook_tools.list_all(principal_of(request))]

    @post(
        "/",
        operation_id="createTool",
        status_code=201,
        responses=errors(400, 409, 413, 415, 422),
        summary="Define a webhook tool",
    )
    async def create_tool(
        self,
        request: Req,
        webhook_tools: NamedDependency[WebhookTools],
        data: JSONBody[ToolCreateBody],
    ) -> ToolOut:
        draft = draft_of(data, WebhookToolDraft)
        return ToolOut.of(await webhook_tools.create(principal_of(request), draft))

    @post(
        "/execute",
        operation_id="executeTool",
        status_code=200,
        responses=errors(400, 404, 413, 415, 422),
        summary="Run a webhook tool by name, signed, outside a conversation",
    )
    async def execute_tool(
        self,
        request: Req,
        webhook_tools: NamedDependency[WebhookTools],
        data: JSONBody[ExecuteBody],
    ) -> ExecutionOut:
        done = await webhook_tools.execute(
            principal_of(request),
            data.name,
            data.arguments,
            agent_id=data.agent_id,
            thread_id=data.thread_id,
        )
        return ExecutionOut.of(done)

    @get("/{tool_id:uuid}", operation_id="getTool", responses=errors(404), summary="A webhook tool")
    async def get_tool(
        self, request: Req, webhook_tools: NamedDependency[WebhookTools], tool_id: FromPath[UUID]
    ) -> ToolOut:
        return ToolOut.of(await webhook_tools.get(principal_of(request), tool_id))

    @patch(
        "/{tool_id:uuid}",
        operation_id="updateTool",
        responses=WRITE,
        summary="Change a webhook tool",
    )
    async def patch_tool(
        self,
        request: Req,
        webhook_tools: NamedDependency[WebhookTools],
        tool_id: FromPath[UUID],
        data: JSONBody[ToolPatchBody],
    ) -> ToolOut:
        changes = draft_of(data, WebhookToolChanges)
        return ToolOut.of(await webhook_tools.update(principal_of(request), tool_id, changes))

    @delete(
        "/{tool_id:uuid}",
        operation_id="deleteTool",
        status_code=200,
        responses=errors(404),
        summary="Delete a webhook tool (agents it was delegated to lose it)",
    )
    async def delete_tool(
        self, request: Req, webhook_tools: NamedDependency[WebhookTools], tool_id: FromPath[UUID]
    ) -> OkBody:
        await webhook_tools.delete(principal_of(request), tool_id)
        return OkBody(ok=True)


class AgentDelegatedController(Controller):
    path = "/api/agents/{agent_id:uuid}/delegated"
    tags = ["webhook tools"]

    @get(
        "/",
        operation_id="getAgentDelegated",
        responses=errors(404),
        summary="Which webhook tools the agent may use",
    )
    async def get_delegated(
        self, request: Req, webhook_tools: NamedDependency[WebhookTools], agent_id: FromPath[UUID]
    ) -> DelegatedOut:
        return DelegatedOut.of(*await webhook_tools.delegated(principal_of(request), agent_id))

    @put(
        "/",
        operation_id="putAgentDelegated",
        responses=errors(400, 404, 413, 415, 422),
        summary="Choose the webhook tools the agent may use (replaces the list)",
    )
    async def put_delegated(
        self,
        request: Req,
        webhook_tools: NamedDependency[WebhookTools],
        agent_id: FromPath[UUID],
        data: JSONBody[DelegatedBody],
    ) -> DelegatedOut:
        return DelegatedOut.of(
            *await webhook_tools.set_delegated(principal_of(request), agent_id, data.tool_ids)
        )
