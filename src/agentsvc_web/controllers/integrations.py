"""Database integrations (``/api/integrations``) and agents' attachments of them
(``/api/agents/{id}/integrations``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import Integration
from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.integrations import (
    APPROVABLE,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_MS,
    MAX_ALLOWED_TABLES,
    MAX_CONNECTION,
    MAX_MAX_BYTES,
    MAX_MAX_ROWS,
    MAX_TABLE_NAME,
    MAX_TIMEOUT_MS,
    MIN_MAX_BYTES,
    MIN_TIMEOUT_MS,
    AttachedIntegrations,
    IntegrationChanges,
    IntegrationDraft,
    Integrations,
)
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import Name, OkBody, copied, items_schema

Req = Request[Any, Any, Any]
TableNameField = Annotated[str, Meta(min_length=1, max_length=MAX_TABLE_NAME)]
Connection = Annotated[str, Meta(min_length=1, max_length=MAX_CONNECTION)]
AllowedTables = Annotated[
    list[TableNameField],
    Meta(max_length=MAX_ALLOWED_TABLES),
    items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_TABLE_NAME)),
]
MaxRows = Annotated[int, Meta(ge=1, le=MAX_MAX_ROWS)]
MaxBytes = Annotated[int, Meta(ge=MIN_MAX_BYTES, le=MAX_MAX_BYTES)]
TimeoutMs = Annotated[int, Meta(ge=MIN_TIMEOUT_MS, le=MAX_TIMEOUT_MS)]


class IntegrationCreateBody(msgspec.Struct, rename="camel"):
    name: Name
    type: Literal["postgresql"]
    connection: Connection
    allowed_tables: AllowedTables | None = None
    max_rows: MaxRows = DEFAULT_MAX_ROWS
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES
    statement_timeout_ms: TimeoutMs = DEFAULT_TIMEOUT_MS


class IntegrationPatchBody(msgspec.Struct, rename="camel"):
    """Only the fields given change; ``allowedTables: null``: every table."""

    name: Name | UnsetType = UNSET
    type: Literal["postgresql"] | UnsetType = UNSET
    connection: Connection | UnsetType = UNSET
    allowed_tables: AllowedTables | UnsetType | None = UNSET
    max_rows: MaxRows | UnsetType = UNSET
    max_bytes: MaxBytes | UnsetType = UNSET
    statement_timeout_ms: TimeoutMs | UnsetType = UNSET


class IntegrationOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    slug: str
    type: str
    has_connection: bool
    read_only: bool
    allowed_tables: list[str] | None
    max_rows: int
    max_bytes: int
    statement_timeout_ms: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, i: Integration) -> IntegrationOut:
        return copied(
            cls,
            i,
            has_connection=bool(i.connection),
            read_only=True,
            allowed_tables=None if i.allowed_tables is None else list(i.allowed_tables),
        )


Approvable = Literal[APPROVABLE]  # type: ignore[valid-type]


class AttachIntegrationBody(msgspec.Struct, rename="camel"):
    integration_id: UUID
    # its tools whose calls wait for a person's approval (docs/tools.md)
    require_approval: Annotated[list[Approvable], Meta(max_length=3)] = []


class AttachedIntegrationOut(IntegrationOut):
    """An attached integration, and which of its tools wait for approval."""

    require_approval: list[str]


def _attached(found: AttachedIntegrations) -> list[AttachedIntegrationOut]:
    return [
        copied(
            AttachedIntegrationOut,
            IntegrationOut.of(i),
            require_approval=list(found.require_approval.get(str(i.id), ())),
        )
        for i in found.integrations
    ]


class IntegrationController(Controller):
    path = "/api/integrations"
    tags = ["integrations"]

    @get(
        "/",
        operation_id="listIntegrations",
        responses=errors(),
        summary="The organization's database integrations",
    )
    async def list_integrations(
        self, request: Req, integrations: NamedDependency[Integrations]
    ) -> list[IntegrationOut]:
        return [IntegrationOut.of(i) for i in await integrations.list_all(principal_of(request))]

    @post(
        "/",
        operation_id="createIntegration",
        status_code=201,
        responses=errors(400, 409, 413, 415, 422),
        summary="Register a database (the connection is tested first; 422 names the problem)",
    )
    async def create_integration(
        self,
        request: Req,
        integrations: NamedDependency[Integrations],
        data: JSONBody[IntegrationCreateBody],
    ) -> IntegrationOut:
        draft = IntegrationDraft(
            name=data.name,
            type=data.type,
            connection=data.connection,
            allowed_tables=None if data.allowed_tables is None else tuple(data.allowed_tables),
            max_rows=data.max_rows,
            max_bytes=data.max_bytes,
            statement_timeout_ms=data.statement_timeout_ms,
        )
        return IntegrationOut.of(await integrations.create(principal_of(request), draft))

    @get(
        "/{integration_id:uuid}",
        operation_id="getIntegration",
        responses=errors(404),
        summary="A database integration",
    )
    async def get_integration(
        self,
        request: Req,
        integrations: NamedDependency[Integrations],
        integration_id: FromPath[UUID],
    ) -> IntegrationOut:
        return IntegrationOut.of(await integrations.get(principal_of(request), integration_id))

    @patch(
        "/{integration_id:uuid}",
        operation_id="updateIntegration",
        responses=errors(400, 404, 409, 413, 415, 422),
        summary="Change a database integration (only the fields given; a new connection "
        "is tested first)",
    )
    async def patch_integration(
        self,
        request: Req,
        integrations: NamedDependency[Integrations],
        integration_id: FromPath[UUID],
        data: JSONBody[IntegrationPatchBody],
    ) -> IntegrationOut:
        changes = msgspec.convert(given_fields(data), IntegrationChanges)
        updated = await integrations.update(principal_of(request), integration_id, changes)
        return IntegrationOut.of(updated)

    @delete(
        "/{integration_id:uuid}",
        operation_id="deleteIntegration",
        status_code=200,
        responses=errors(404),
        summary="Delete a database integration (agents stop seeing its tools)",
    )
    async def delete_integration(
        self,
        request: Req,
        integrations: NamedDependency[Integrations],
        integration_id: FromPath[UUID],
    ) -> OkBody:
        await integrations.delete(principal_of(request), integration_id)
        return OkBody(ok=True)


class AgentIntegrationController(Controller):
    path = "/api/agents/{agent_id:uuid}/integrations"
    tags = ["integrations"]

    @get(
        "/",
        operation_id="listAgentIntegrations",
        responses=errors(404),
        summary="The database integrations attached to an agent",
    )
    async def list_attached(
        self, request: Req, integrations: NamedDependency[Integrations], agent_id: FromPath[UUID]
    ) -> list[AttachedIntegrationOut]:
        return _attached(await integrations.attachments(principal_of(request), agent_id))

    @post(
        "/",
        operation_id="attachAgentIntegration",
        status_code=200,
        responses=errors(400, 404, 413, 415, 422),
        summary="Attach a database integration to an agent; answers the agent's integrations",
    )
    async def attach(
        self,
        request: Req,
        integrations: NamedDependency[Integrations],
        agent_id: FromPath[UUID],
        data: JSONBody[AttachIntegrationBody],
    ) -> list[AttachedIntegrationOut]:
        found = await integrations.attach(
            principal_of(request), agent_id, data.integration_id, tuple(data.require_approval)
        )
        return _attached(found)

    @delete(
        "/",
        operation_id="detachAgentIntegration",
        status_code=200,
        responses=errors(404, 422),
        summary="Detach a database integration from an agent (?integrationId=); "
        "ok is false when it was not attached",
    )
    async def detach(
        self,
        request: Req,
        integrations: NamedDependency[Integrations],
        agent_id: FromPath[UUID],
        integration_id: Annotated[UUID, QueryParameter(name="integrationId")],
    ) -> OkBody:
        detached = await integrations.detach(principal_of(request), agent_id, integration_id)
        return OkBody(ok=detached)
