"""``GET/PUT /api/agents/{id}/web``: the agent's web tools (docs/api.md, "Web")."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, put
from litestar.di import NamedDependency
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import FromPath, JSONBody
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.web import (
    MAX_DOMAIN,
    MAX_DOMAINS,
    MAX_FETCH_BYTES,
    MAX_FETCH_TIMEOUT_MS,
    MAX_RESULTS,
    MAX_TEXT_CHARS,
    MIN_FETCH_BYTES,
    MIN_FETCH_TIMEOUT_MS,
    MIN_RESULTS,
    MIN_TEXT_CHARS,
    WebConfig,
    WebSettings,
)
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied, items_schema

Req = Request[Any, Any, Any]

Domains = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=MAX_DOMAIN)]],
    Meta(max_length=MAX_DOMAINS),
    items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_DOMAIN)),
]


class WebPutBody(msgspec.Struct, rename="camel"):
    fetch_enabled: bool | UnsetType = UNSET
    search_enabled: bool | UnsetType = UNSET
    max_fetch_bytes: Annotated[int, Meta(ge=MIN_FETCH_BYTES, le=MAX_FETCH_BYTES)] | UnsetType = (
        UNSET
    )
    max_text_chars: Annotated[int, Meta(ge=MIN_TEXT_CHARS, le=MAX_TEXT_CHARS)] | UnsetType = UNSET
    fetch_timeout_ms: (
        Annotated[int, Meta(ge=MIN_FETCH_TIMEOUT_MS, le=MAX_FETCH_TIMEOUT_MS)] | UnsetType
    ) = UNSET
    max_results: Annotated[int, Meta(ge=MIN_RESULTS, le=MAX_RESULTS)] | UnsetType = UNSET
    allowed_domains: Domains | UnsetType = UNSET
    blocked_domains: Domains | UnsetType = UNSET


class WebOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    fetch_enabled: bool
    search_enabled: bool
    max_fetch_bytes: int
    max_text_chars: int
    fetch_timeout_ms: int
    max_results: int
    allowed_domains: list[str]
    blocked_domains: list[str]
    # the service's search engine (AGENTSVC_WEB_SEARCH_PROVIDER); null: search is off
    search_provider: str | None

    @classmethod
    def of(cls, c: WebConfig, provider: str | None) -> WebOut:
        return copied(
            cls,
            c,
            allowed_domains=list(c.allowed_domains),
            blocked_domains=list(c.blocked_domains),
            search_provider=provider,
        )


class AgentWebController(Controller):
    path = "/api/agents/{agent_id:uuid}/web"
    tags = ["web"]

    @get(
        "/",
        operation_id="getAgentWeb",
        responses=errors(404),
        summary="The agent's web tools configuration (web_fetch, web_search)",
    )
    async def get_config(
        self, request: Req, web: NamedDependency[WebSettings], agent_id: FromPath[UUID]
    ) -> WebOut:
        config = await web.get(principal_of(request), agent_id)
        return WebOut.of(config, web.search_provider)

    @put(
        "/",
        operation_id="putAgentWeb",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied web tools settings",
    )
    async def put_config(
        self,
        request: Req,
        web: NamedDependency[WebSettings],
        agent_id: FromPath[UUID],
        data: JSONBody[WebPutBody],
    ) -> WebOut:
        changes = given_fields(data)
        config = await web.update(principal_of(request), agent_id, changes)
        return WebOut.of(config, web.search_provider)
