"""Managed OAuth MCP providers (docs/managed-oauth.md): the catalogue, the flow
(start, callback, disconnect) and the services of an agent's provider server."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import Meta

from agentsvc_core.errors import InvalidState
from agentsvc_core.ports.managed_oauth import ManagedProvider
from agentsvc_core.use_cases.managed_oauth import ManagedOAuth, ServiceState, scopes_for
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors

Req = Request[Any, Any, Any]
ProviderId = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
ServiceId = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]


class ManagedServiceOut(msgspec.Struct):
    id: str
    name: str
    scopes: list[str]
    tools: list[str]


class ManagedAuthorizationOut(msgspec.Struct):
    authorization_endpoint: str
    token_endpoint: str
    revocation_endpoint: str | None
    scopes_separator: str
    pkce: bool
    scopes: list[str]


class ManagedProviderOut(msgspec.Struct):
    id: str
    name: str
    description: str
    docs_url: str | None
    mcp_url: str | None
    transport: str
    available: bool
    reason: str | None
    authorization: ManagedAuthorizationOut
    services: list[ManagedServiceOut]

    @classmethod
    def of(cls, p: ManagedProvider) -> ManagedProviderOut:
        return cls(
            id=p.id,
            name=p.name,
            description=p.description,
            docs_url=p.docs_url,
            mcp_url=p.mcp_url,
            transport=p.transport,
            available=p.available,
            reason=None if p.available else f"set {', '.join(p.missing)}",
            authorization=ManagedAuthorizationOut(
                authorization_endpoint=p.authorization_endpoint,
                token_endpoint=p.token_endpoint,
                revocation_endpoint=p.revocation_endpoint,
                scopes_separator=p.scopes_separator,
                pkce=p.pkce,
                scopes=scopes_for(p, None),
            ),
            services=[
                ManagedServiceOut(id=s.id, name=s.name, scopes=list(s.scopes), tools=list(s.tools))
                for s in p.services
            ],
        )


class ManagedStartBody(msgspec.Struct, rename="camel"):
    provider: ProviderId
    agent_id: UUID | None = None
    services: Annotated[list[ServiceId], Meta(max_length=32)] | None = None


class ManagedStartOut(msgspec.Struct):
    authorization_url: str
    state: str
    expires_at: datetime


class ManagedConnectedOut(msgspec.Struct):
    ok: bool
    provider: str
    mcp_server_id: UUID
    agent_id: UUID | None


class ManagedDisconnectBody(msgspec.Struct, rename="camel"):
    provider: ProviderId


class ManagedDisconnectOut(msgspec.Struct):
    ok: bool
    revoked: bool


class ServiceStateOut(msgspec.Struct):
    id: str
    name: str
    scopes: list[str]
    tools: list[str]
    enabled: bool


class AgentServicesOut(msgspec.Struct):
    mcp_server_id: UUID
    services: list[ServiceStateOut]


class AgentServicesBody(msgspec.Struct, rename="camel"):
    # the services named are turned on (true) or off (false); the others stay as they are
    services: Annotated[dict[ServiceId, bool], Meta(max_length=32)]


def _services(mcp_id: UUID, states: list[ServiceState]) -> AgentServicesOut:
    return AgentServicesOut(
        mcp_server_id=mcp_id,
        services=[
            ServiceStateOut(
                id=s.service.id,
                name=s.service.name,
                scopes=list(s.service.scopes),
                tools=list(s.service.tools),
                enabled=s.enabled,
            )
            for s in states
        ],
    )


class ManagedRegistryController(Controller):
    path = "/api/mcp-registry/managed"
    tags = ["mcp servers"]

    @get(
        "/",
        operation_id="listManagedMcpProviders",
        responses=errors(),
        summary="Managed OAuth MCP providers: the catalogue, and which this deployment can connect",
    )
    async def list_providers(
        self, managed_oauth: NamedDependency[ManagedOAuth]
    ) -> list[ManagedProviderOut]:
        return [ManagedProviderOut.of(p) for p in managed_oauth.providers()]


class ManagedOAuthController(Controller):
    path = "/api/mcps/managed-oauth"
    tags = ["mcp servers"]

    @post(
        "/start",
        operation_id="startManagedMcpOAuth",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 403, 404, 413, 415, 422),
        summary="Start connecting a managed provider for the caller; open authorization_url "
        "in a browser (attaching to an agent needs an admin)",
    )
    async def start(
        self,
        request: Req,
        managed_oauth: NamedDependency[ManagedOAuth],
        data: JSONBody[ManagedStartBody],
    ) -> ManagedStartOut:
        started = await managed_oauth.start(
            principal_of(request), data.provider, data.agent_id, data.services
        )
        return ManagedStartOut(
            authorization_url=started.authorization_url,
            state=started.state,
            expires_at=started.expires_at,
        )

    @get(
        "/callback",
        operation_id="managedMcpOAuthCallback",
        responses=errors(400, 422, 502),
        security=[],
        summary="Where the provider sends the browser back (no bearer token: the single-use "
        "state authenticates it)",
    )
    async def callback(
        self,
        managed_oauth: NamedDependency[ManagedOAuth],
        oauth_state: Annotated[str, QueryParameter(name="state", max_length=512)] = "",
        code: Annotated[str, QueryParameter(name="code", max_length=4096)] = "",
        error: Annotated[str | None, QueryParameter(name="error", max_length=256)] = None,
    ) -> ManagedConnectedOut:
        if error is not None:
            # not repeated: the browser that follows a forged link would show it
            raise InvalidState("the provider refused the request")
        if not oauth_state or not code:
            raise InvalidState("the callback needs code and state")
        done = await managed_oauth.callback(oauth_state, code)
        return ManagedConnectedOut(
            ok=True,
            provider=done.provider,
            mcp_server_id=done.mcp_server_id,
            agent_id=done.agent_id,
        )

    @post(
        "/disconnect",
        operation_id="disconnectManagedMcpOAuth",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 404, 413, 415, 422),
        summary="Revoke the caller's grant at the provider (where it can) and forget its tokens",
    )
    async def disconnect(
        self,
        request: Req,
        managed_oauth: NamedDependency[ManagedOAuth],
        data: JSONBody[ManagedDisconnectBody],
    ) -> ManagedDisconnectOut:
        revoked = await managed_oauth.disconnect(principal_of(request), data.provider)
        return ManagedDisconnectOut(ok=True, revoked=revoked)


class AgentMcpServicesController(Controller):
    path = "/api/agents/{agent_id:uuid}/mcps/{mcp_id:uuid}/services"
    tags = ["mcp servers"]

    @get(
        "/",
        operation_id="listAgentMcpServices",
        responses=errors(404),
        summary="A managed provider's services for this agent: their tools, and which are on",
    )
    async def list_services(
        self,
        request: Req,
        managed_oauth: NamedDependency[ManagedOAuth],
        agent_id: FromPath[UUID],
        mcp_id: FromPath[UUID],
    ) -> AgentServicesOut:
        states = await managed_oauth.services(principal_of(request), agent_id, mcp_id)
        return _services(mcp_id, states)

    @patch(
        "/",
        operation_id="updateAgentMcpServices",
        responses=errors(400, 404, 413, 415, 422),
        summary="Turn a managed provider's services on or off for this agent "
        '({"services": {"gmail": true, "drive": false}})',
    )
    async def set_services(
        self,
        request: Req,
        managed_oauth: NamedDependency[ManagedOAuth],
        agent_id: FromPath[UUID],
        mcp_id: FromPath[UUID],
        data: JSONBody[AgentServicesBody],
    ) -> AgentServicesOut:
        who = principal_of(request)
        states = await managed_oauth.set_services(who, agent_id, mcp_id, data.services)
        return _services(mcp_id, states)
