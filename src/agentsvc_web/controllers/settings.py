from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, post, put
from litestar.di import NamedDependency
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import FromPath, JSONBody
from msgspec import Meta

from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.org_settings import (
    MAX_RETENTION_DAYS,
    MAX_TIMEOUT_MS,
    MAX_TOKENS_BOUND,
    MIN_ALPHA_TRIGGER,
    MIN_BETA_THRESHOLD,
    MIN_RETENTION_DAYS,
    MIN_TIMEOUT_MS,
    CompactionConfig,
    CompactionSettings,
    OrgSettings,
    OrgSettingsView,
    ResolverConfig,
)
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied, items_schema

Req = Request[Any, Any, Any]


class CredentialsPutBody(msgspec.Struct, rename="camel"):
    enabled: bool
    resolver_url: Annotated[str, Meta(max_length=2048)] | None = None
    timeout_ms: Annotated[int, Meta(ge=MIN_TIMEOUT_MS, le=MAX_TIMEOUT_MS)] = 5000


class CredentialsOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    enabled: bool
    resolver_url: str
    timeout_ms: int

    @classmethod
    def of(cls, c: ResolverConfig) -> CredentialsOut:
        return copied(cls, c)


class OrgSettingsBody(msgspec.Struct, rename="camel"):
    allowed_embed_domains: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=253)]],
            Meta(max_length=100),
            items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=253)),
        ]
        | None
    ) = None
    rotate_signing_secret: bool = False
    # threads untouched this many days are deleted by the maintenance sweep (null: kept)
    thread_retention_days: (
        Annotated[int, Meta(ge=MIN_RETENTION_DAYS, le=MAX_RETENTION_DAYS)]
        | msgspec.UnsetType
        | None
    ) = msgspec.UNSET


class OrgSettingsOut(msgspec.Struct):
    org_id: str
    allowed_embed_domains: list[str]
    signing_secret: str
    thread_retention_days: int | None

    @classmethod
    def of(cls, v: OrgSettingsView) -> OrgSettingsOut:
        return copied(cls, v, allowed_embed_domains=list(v.allowed_embed_domains))


class AgentCredentialsController(Controller):
    path = "/api/agents/{agent_id:uuid}/credentials"
    tags = ["credential resolver"]

    @get(
        "/",
        operation_id="getAgentCredentials",
        responses=errors(404),
        summary="The agent's credential resolver configuration",
    )
    async def get_config(
        self, request: Req, org_settings: NamedDependency[OrgSettings], agent_id: FromPath[UUID]
    ) -> CredentialsOut:
        return CredentialsOut.of(await org_settings.resolver(principal_of(request), agent_id))

    @put(
        "/",
        operation_id="putAgentCredentials",
        responses=errors(400, 404, 413, 415, 422),
        summary="Configure the agent's credential resolver (bring your own key)",
    )
    async def put_config(
        self,
        request: Req,
        org_settings: NamedDependency[OrgSettings],
        agent_id: FromPath[UUID],
        data: JSONBody[CredentialsPutBody],
    ) -> CredentialsOut:
        config = await org_settings.set_resolver(
            principal_of(request),
            agent_id,
            enabled=data.enabled,
            url=data.resolver_url,
            timeout_ms=data.timeout_ms,
        )
        return CredentialsOut.of(config)


class OrgSettingsController(Controller):
    path = "/api/orgs/settings"
    tags = ["organization"]

    @get(
        "/",
        operation_id="getOrgSettings",
        opt=ADMIN,
        responses=errors(403),
        summary="Organization settings, with the signing secret of outbound webhooks",
    )
    async def get_settings(
        self, request: Req, org_settings: NamedDependency[OrgSettings]
    ) -> OrgSettingsOut:
        return OrgSettingsOut.of(await org_settings.get(principal_of(request)))

    @post(
        "/",
        operation_id="updateOrgSettings",
        status_code=200,
        responses=errors(400, 403, 413, 415, 422),
        summary="Change embed domains, rotate the signing secret, set the thread retention",
    )
    async def update_settings(
        self,
        request: Req,
        org_settings: NamedDependency[OrgSettings],
        data: JSONBody[OrgSettingsBody],
    ) -> OrgSettingsOut:
        view = await org_settings.update(
            principal_of(request),
            domains=data.allowed_embed_domains,
            rotate=data.rotate_signing_secret,
            retention_days=data.thread_retention_days,
        )
        return OrgSettingsOut.of(view)


class CompactionPutBody(msgspec.Struct, rename="camel"):
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    alpha_trigger_tokens: (
        Annotated[int, Meta(ge=MIN_ALPHA_TRIGGER, le=MAX_TOKENS_BOUND)] | msgspec.UnsetType
    ) = msgspec.UNSET
    alpha_instructions: Annotated[str, Meta(max_length=20_000)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    alpha_pause_after: bool | msgspec.UnsetType = msgspec.UNSET
    beta_compact_threshold: (
        Annotated[int, Meta(ge=MIN_BETA_THRESHOLD, le=MAX_TOKENS_BOUND)] | msgspec.UnsetType
    ) = msgspec.UNSET


class CompactionOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    enabled: bool
    alpha_trigger_tokens: int
    alpha_instructions: str | None
    alpha_pause_after: bool
    beta_compact_threshold: int

    @classmethod
    def of(cls, c: CompactionConfig) -> CompactionOut:
        return copied(cls, c)


class AgentCompactionController(Controller):
    path = "/api/agents/{agent_id:uuid}/compaction"
    tags = ["compaction"]

    @get(
        "/",
        operation_id="getAgentCompaction",
        responses=errors(404),
        summary="The agent's context compaction configuration",
    )
    async def get_config(
        self,
        request: Req,
        compaction: NamedDependency[CompactionSettings],
        agent_id: FromPath[UUID],
    ) -> CompactionOut:
        return CompactionOut.of(await compaction.get(principal_of(request), agent_id))

    @put(
        "/",
        operation_id="putAgentCompaction",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied compaction settings",
    )
    async def put_config(
        self,
        request: Req,
        compaction: NamedDependency[CompactionSettings],
        agent_id: FromPath[UUID],
        data: JSONBody[CompactionPutBody],
    ) -> CompactionOut:
        changes = given_fields(data)
        return CompactionOut.of(await compaction.update(principal_of(request), agent_id, changes))
