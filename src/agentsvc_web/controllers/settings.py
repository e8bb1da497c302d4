from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ClassVar
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, post
from litestar import put as put_route
from litestar.di import NamedDependency
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import FromPath, JSONBody
from msgspec import Meta

from agentsvc_core.entities import Principal
from agentsvc_core.use_cases.org_settings import (
    MAX_TIMEOUT_MS,
    MAX_TOKENS_BOUND,
    MIN_ALPHA_TRIGGER,
    MIN_BETA_THRESHOLD,
    MIN_TIMEOUT_MS,
    CompactionConfig,
    CompactionSettings,
    OrgSettings,
    OrgSettingsView,
    ResolverConfig,
)
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers._routes import routed
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


class OrgSettingsOut(msgspec.Struct):
    org_id: str
    allowed_embed_domains: list[str]
    signing_secret: str

    @classmethod
    def of(cls, v: OrgSettingsView) -> OrgSettingsOut:
        return copied(cls, v, allowed_embed_domains=list(v.allowed_embed_domains))


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
        summary="Change embed domains and/or rotate the signing secret",
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


# An agent's configuration of one kind (its credential resolver, its compaction):
# GET and PUT at /api/agents/{agent_id}/<kind>, written once. Each kind names its
# use case (the dependency), how to read and write through it, its body and answer.


class _AgentConfig(Controller):
    read: ClassVar[Callable[[Any, Principal, UUID], Awaitable[Any]]]
    write: ClassVar[Callable[[Any, Principal, UUID, Any], Awaitable[Any]]]
    out: ClassVar[type[CredentialsOut | CompactionOut]]


async def _get_config(
    self: _AgentConfig, request: Req, use_case: Any, agent_id: FromPath[UUID]
) -> Any:
    return self.out.of(await type(self).read(use_case, principal_of(request), agent_id))


async def _put_config(
    self: _AgentConfig, request: Req, use_case: Any, agent_id: FromPath[UUID], data: Any
) -> Any:
    return self.out.of(await type(self).write(use_case, principal_of(request), agent_id, data))


def _agent_config_routes(
    name: str,
    kind: str,
    tag: str,
    *,
    use_case: tuple[str, type[Any]],
    body: type[msgspec.Struct],
    out: type[CredentialsOut | CompactionOut],
    read: Callable[[Any, Principal, UUID], Awaitable[Any]],
    write: Callable[[Any, Principal, UUID, Any], Awaitable[Any]],
    got: tuple[str, str],
    put: tuple[str, str],
) -> type[Controller]:
    """The controller of an agent's ``kind`` of configuration; ``use_case`` is the
    dependency's (name, type); ``got`` and ``put`` are (operation id, summary)."""
    names = {"use_case": use_case[0]}
    dependency = NamedDependency[use_case[1]]  # type: ignore[valid-type]
    data = JSONBody[body]  # type: ignore[valid-type]
    return type(
        name,
        (_AgentConfig,),
        {
            "path": f"/api/agents/{{agent_id:uuid}}/{kind}",
            "tags": [tag],
            "read": staticmethod(read),
            "write": staticmethod(write),
            "out": out,
            "get_config": get("/", operation_id=got[0], responses=errors(404), summary=got[1])(
                routed(_get_config, names=names, types={"use_case": dependency, "return": out})
            ),
            "put_config": put_route(
                "/",
                operation_id=put[0],
                responses=errors(400, 404, 413, 415, 422),
                summary=put[1],
            )(
                routed(
                    _put_config,
                    names=names,
                    types={"use_case": dependency, "data": data, "return": out},
                )
            ),
        },
    )


async def _set_resolver(
    org_settings: OrgSettings, who: Principal, agent_id: UUID, data: CredentialsPutBody
) -> ResolverConfig:
    return await org_settings.set_resolver(
        who, agent_id, enabled=data.enabled, url=data.resolver_url, timeout_ms=data.timeout_ms
    )


async def _update_compaction(
    compaction: CompactionSettings, who: Principal, agent_id: UUID, data: CompactionPutBody
) -> CompactionConfig:
    changes = {
        f: getattr(data, f) for f in data.__struct_fields__ if getattr(data, f) is not msgspec.UNSET
    }
    return await compaction.update(who, agent_id, changes)


AgentCredentialsController = _agent_config_routes(
    "AgentCredentialsController",
    "credentials",
    "credential resolver",
    use_case=("org_settings", OrgSettings),
    body=CredentialsPutBody,
    out=CredentialsOut,
    read=OrgSettings.resolver,
    write=_set_resolver,
    got=("getAgentCredentials", "The agent's credential resolver configuration"),
    put=("putAgentCredentials", "Configure the agent's credential resolver (bring your own key)"),
)
AgentCompactionController = _agent_config_routes(
    "AgentCompactionController",
    "compaction",
    "compaction",
    use_case=("compaction", CompactionSettings),
    body=CompactionPutBody,
    out=CompactionOut,
    read=CompactionSettings.get,
    write=_update_compaction,
    got=("getAgentCompaction", "The agent's context compaction configuration"),
    put=("putAgentCompaction", "Change the supplied compaction settings"),
)
