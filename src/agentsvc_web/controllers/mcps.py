from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, TypeVar
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, UnsetType

from agentsvc_core.errors import InvalidInput, InvalidState
from agentsvc_core.use_cases.mcp_oauth import McpOAuth
from agentsvc_core.use_cases.mcp_servers import (
    AttachedServer,
    Credentials,
    McpChanges,
    McpDraft,
    McpServers,
)
from agentsvc_core.use_cases.registry import RegistrySearch
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import (
    AttachBody,
    AttachmentOut,
    CredentialsBody,
    DetachBody,
    McpCreateBody,
    McpOut,
    McpPatchBody,
    McpTestOut,
    OkBody,
    TestedToolOut,
)

Req = Request[Any, Any, Any]


# --- the official MCP registry's search, as answered ---------------------------------


class RegistryRemoteOut(msgspec.Struct, rename="camel"):
    transport: str
    url: str


class RegistryPackageOut(msgspec.Struct, rename="camel"):
    registry_type: str
    identifier: str
    version: str | None
    transport: str | None


class RegistryEntryOut(msgspec.Struct, rename="camel"):
    name: str
    title: str | None
    description: str
    version: str | None
    repository_url: str | None
    website_url: str | None
    remotes: list[RegistryRemoteOut]
    packages: list[RegistryPackageOut]


class RegistrySearchOut(msgspec.Struct):
    servers: list[RegistryEntryOut]


WRITE = errors(400, 404, 413, 415, 422)


def _creds(body: CredentialsBody | None) -> Credentials | None:
    return None if body is None else Credentials(headers=body.headers, env=body.env)


def _names(value: list[str] | UnsetType | None) -> tuple[str, ...] | UnsetType | None:
    if isinstance(value, UnsetType) or value is None:
        return value
    return tuple(value)


def _attachment(item: AttachedServer, mcps: McpServers) -> AttachmentOut:
    """``effective_tools``: what the model is offered (a managed provider's server:
    only the tools of the services on)."""
    return AttachmentOut(
        mcp_server_id=item.server.id,
        allowed_tools=None
        if item.attachment.allowed_tools is None
        else list(item.attachment.allowed_tools),
        effective_tools=[t.name for t in mcps.tools_of(item)],
        created_at=item.attachment.created_at,
        server=McpOut.of(item.server),
        require_approval=list(item.attachment.require_approval or ()),
    )


class McpController(Controller):
    path = "/api/mcps"
    tags = ["mcp servers"]

    @get(
        "/",
        operation_id="listMcpServers",
        responses=errors(),
        summary="The organization's MCP servers",
    )
    async def list_servers(self, request: Req, mcps: NamedDependency[McpServers]) -> list[McpOut]:
        return [McpOut.of(s) for s in await mcps.list_all(principal_of(request))]

    @post(
        "/",
        operation_id="createMcpServer",
        status_code=201,
        responses=errors(400, 413, 415, 422),
        summary="Register an MCP server",
    )
    async def create_server(
        self, request: Req, mcps: NamedDependency[McpServers], data: JSONBody[McpCreateBody]
    ) -> McpOut:
        if data.slug is not UNSET:
            raise InvalidInput("slug", "is derived from the name and must not be sent")
        draft = McpDraft(
            name=data.name,
            transport=data.transport,
            url=data.url,
            command=data.command,
            args=tuple(data.args),
            credentials=_creds(data.credentials),
            allowed_tools=None if data.allowed_tools is None else tuple(data.allowed_tools),
        )
        return McpOut.of(await mcps.create(principal_of(request), draft))

    @get(
        "/{mcp_id:uuid}",
        operation_id="getMcpServer",
        responses=errors(404),
        summary="An MCP server",
    )
    async def get_server(
        self, request: Req, mcps: NamedDependency[McpServers], mcp_id: FromPath[UUID]
    ) -> McpOut:
        return McpOut.of(await mcps.get(principal_of(request), mcp_id))

    @patch(
        "/{mcp_id:uuid}",
        operation_id="updateMcpServer",
        responses=WRITE,
        summary="Change an MCP server",
    )
    async def patch_server(
        self,
        request: Req,
        mcps: NamedDependency[McpServers],
        mcp_id: FromPath[UUID],
        data: JSONBody[McpPatchBody],
    ) -> McpOut:
        if data.slug is not UNSET:
            raise InvalidInput("slug", "is derived from the name and must not be sent")
        changes = McpChanges(
            name=data.name,
            url=data.url,
            command=data.command,
            args=UNSET if isinstance(data.args, UnsetType) else tuple(data.args),
            credentials=UNSET
            if isinstance(data.credentials, UnsetType)
            else _creds(data.credentials),
            allowed_tools=_names(data.allowed_tools),
        )
        return McpOut.of(await mcps.update(principal_of(request), mcp_id, changes))

    @delete(
        "/{mcp_id:uuid}",
        operation_id="deleteMcpServer",
        status_code=200,
        responses=errors(404),
        summary="Delete an MCP server and all its attachments",
    )
    async def delete_server(
        self, request: Req, mcps: NamedDependency[McpServers], mcp_id: FromPath[UUID]
    ) -> OkBody:
        await mcps.delete(principal_of(request), mcp_id)
        return OkBody(ok=True)

    @post(
        "/{mcp_id:uuid}/test",
        operation_id="testMcpServer",
        status_code=200,
        responses=errors(404),
        summary="Connect, list the tools and refresh the cache",
    )
    async def test_server(
        self, request: Req, mcps: NamedDependency[McpServers], mcp_id: FromPath[UUID]
    ) -> McpTestOut:
        result = await mcps.test(principal_of(request), mcp_id)
        return McpTestOut(
            ok=result.ok,
            tools=[
                TestedToolOut(name=t.name, description=t.description, input_schema=t.input_schema)
                for t in result.tools
            ],
            error=result.error,
        )


# The attachments of agents and of runners: the same routes under each owner's path,
# written once. ``_owner_routes`` builds each owner's controller; the handlers take
# the owner's id as ``owner_id`` and ``_named`` gives that parameter the path's name
# for it (``agent_id``, ``runner_id``): Litestar passes path parameters by name.


class _OwnerMcps(Controller):
    owner_kind: ClassVar[Literal["agent", "runner"]]


async def _list_attached(
    self: _OwnerMcps, request: Req, mcps: NamedDependency[McpServers], owner_id: FromPath[UUID]
) -> list[AttachmentOut]:
    kind = self.owner_kind
    who = principal_of(request)
    return [_attachment(i, mcps) for i in await mcps.attached(who, kind, owner_id)]


async def _attach(
    self: _OwnerMcps,
    request: Req,
    mcps: NamedDependency[McpServers],
    owner_id: FromPath[UUID],
    data: JSONBody[AttachBody],
) -> AttachmentOut:
    allowed = None if data.allowed_tools is None else tuple(data.allowed_tools)
    approval = None if data.require_approval is None else tuple(data.require_approval)
    who, kind = principal_of(request), self.owner_kind
    attached = await mcps.attach(who, kind, owner_id, data.mcp_server_id, allowed, approval)
    return _attachment(attached, mcps)


async def _detach(
    self: _OwnerMcps,
    request: Req,
    mcps: NamedDependency[McpServers],
    owner_id: FromPath[UUID],
    data: JSONBody[DetachBody],
) -> OkBody:
    who, kind = principal_of(request), self.owner_kind
    return OkBody(ok=await mcps.detach(who, kind, owner_id, data.mcp_server_id))


_Handler = TypeVar("_Handler", bound=Callable[..., Awaitable[Any]])


def _named(fn: _Handler, name: str) -> _Handler:
    """``fn`` with its ``owner_id`` parameter called ``name`` (signature and
    annotations, which Litestar reads)."""

    @functools.wraps(fn)
    async def handler(*args: Any, **kwargs: Any) -> Any:
        kwargs["owner_id"] = kwargs.pop(name)
        return await fn(*args, **kwargs)

    signature = inspect.signature(fn)
    handler.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            p.replace(name=name) if p.name == "owner_id" else p
            for p in signature.parameters.values()
        ]
    )
    handler.__annotations__ = {
        name if k == "owner_id" else k: v for k, v in fn.__annotations__.items()
    }
    return handler  # type: ignore[return-value]


def _owner_routes(
    kind: Literal["agent", "runner"],
    name: str,
    *,
    listed: tuple[str, str],
    attached: tuple[str, str],
    detached: tuple[str, str] | None = None,
) -> type[Controller]:
    """The controller of ``kind``'s attachments at ``/api/{kind}s/{<kind>_id}/mcps``;
    each route is given as (operation id, summary); no ``detached``, no DELETE."""
    param = f"{kind}_id"
    routes: dict[str, Any] = {
        "path": f"/api/{kind}s/{{{param}:uuid}}/mcps",
        "tags": ["mcp servers"],
        "list_attached": get("/", operation_id=listed[0], responses=errors(404), summary=listed[1])(
            _named(_list_attached, param)
        ),
        "attach": post(
            "/",
            operation_id=attached[0],
            status_code=200,
            responses=errors(400, 404, 413, 415, 422),
            summary=attached[1],
        )(_named(_attach, param)),
    }
    if detached is not None:
        routes["detach"] = delete(
            "/",
            operation_id=detached[0],
            status_code=200,
            responses=errors(400, 404, 413, 415, 422),
            summary=detached[1],
        )(_named(_detach, param))
    return type(name, (_OwnerMcps,), {"owner_kind": kind, **routes})


AgentMcpController = _owner_routes(
    "agent",
    "AgentMcpController",
    listed=("listAgentMcpServers", "MCP servers attached to an agent"),
    attached=(
        "attachAgentMcpServer",
        "Attach an MCP server to an agent (or change its allowed tools)",
    ),
    detached=("detachAgentMcpServer", "Detach an MCP server from an agent"),
)
RunnerMcpController = _owner_routes(
    "runner",
    "RunnerMcpController",
    listed=(
        "listRunnerMcpServers",
        "MCP servers attached to a runner (defaults for all its steps)",
    ),
    attached=("attachRunnerMcpServer", "Attach an MCP server to a runner"),
)


class RegistryController(Controller):
    path = "/api/mcp-registry"
    tags = ["mcp servers"]

    @get(
        "/search",
        operation_id="searchMcpRegistry",
        responses=errors(422, 502),
        summary="Search the MCP registry (AGENTSVC_MCP_REGISTRY_URL) for servers to register",
    )
    async def search(
        self,
        request: Req,
        registry: NamedDependency[RegistrySearch],
        q: Annotated[str, QueryParameter(name="q", max_length=200, pattern=r"^[^\x00]*$")] = "",
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=100)] = 20,
    ) -> RegistrySearchOut:
        found = await registry.search(principal_of(request), q, limit)
        return RegistrySearchOut(
            servers=[
                RegistryEntryOut(
                    name=e.name,
                    title=e.title,
                    description=e.description,
                    version=e.version,
                    repository_url=e.repository_url,
                    website_url=e.website_url,
                    remotes=[
                        RegistryRemoteOut(transport=r.transport, url=r.url) for r in e.remotes
                    ],
                    packages=[
                        RegistryPackageOut(
                            registry_type=p.registry_type,
                            identifier=p.identifier,
                            version=p.version,
                            transport=p.transport,
                        )
                        for p in e.packages
                    ],
                )
                for e in found
            ]
        )


class OAuthStartOut(msgspec.Struct, rename="camel"):
    redirect_url: str
    state: str
    expires_at: datetime


class OAuthDoneOut(msgspec.Struct, rename="camel"):
    ok: bool
    mcp_server_id: UUID


class OAuthStatusOut(msgspec.Struct, rename="camel"):
    connected: bool
    expires_at: datetime | None
    scope: str | None


class McpOAuthController(Controller):
    path = "/api/mcps/{mcp_id:uuid}/oauth"
    tags = ["mcp servers"]

    @get(
        "/",
        operation_id="getMcpOAuth",
        responses=errors(404),
        summary="Whether the caller has connected the server with OAuth (its own grant; "
        "an API key's is the organization's)",
    )
    async def grant_status(
        self,
        request: Req,
        mcps: NamedDependency[McpServers],
        oauth: NamedDependency[McpOAuth],
        mcp_id: FromPath[UUID],
    ) -> OAuthStatusOut:
        who = principal_of(request)
        found = await oauth.status(who, await mcps.get(who, mcp_id))
        return OAuthStatusOut(
            connected=found.connected, expires_at=found.expires_at, scope=found.scope
        )

    @delete(
        "/",
        operation_id="disconnectMcpOAuth",
        opt=MEMBER,
        status_code=200,
        responses=errors(404),
        summary="Forget the caller's OAuth grant for the server (200 also when it held none)",
    )
    async def disconnect(
        self,
        request: Req,
        mcps: NamedDependency[McpServers],
        oauth: NamedDependency[McpOAuth],
        mcp_id: FromPath[UUID],
    ) -> OkBody:
        who = principal_of(request)
        await oauth.disconnect(who, await mcps.get(who, mcp_id))
        return OkBody(ok=True)

    @post(
        "/start",
        operation_id="startMcpOAuth",
        opt=MEMBER,
        status_code=200,
        responses=errors(404, 422, 502),
        summary="Start the OAuth 2.1 flow for the caller; open redirectUrl in a browser",
    )
    async def start(
        self,
        request: Req,
        mcps: NamedDependency[McpServers],
        oauth: NamedDependency[McpOAuth],
        mcp_id: FromPath[UUID],
    ) -> OAuthStartOut:
        who = principal_of(request)
        started = await oauth.start(who, await mcps.get(who, mcp_id))
        return OAuthStartOut(
            redirect_url=started.redirect_url, state=started.state, expires_at=started.expires_at
        )

    @get(
        "/callback",
        operation_id="mcpOAuthCallback",
        responses=errors(400, 404, 422, 502),
        security=[],
        summary="Where the authorization server sends the browser back (no bearer token: "
        "the single-use state authenticates it)",
    )
    async def callback(
        self,
        oauth: NamedDependency[McpOAuth],
        mcp_id: FromPath[UUID],
        oauth_state: Annotated[str, QueryParameter(name="state", max_length=512)] = "",
        code: Annotated[str, QueryParameter(name="code", max_length=4096)] = "",
        error: Annotated[str | None, QueryParameter(name="error", max_length=256)] = None,
    ) -> OAuthDoneOut:
        if error is not None:
            # not repeated: the browser that follows a forged link would show it
            raise InvalidState("the authorization server refused the request")
        if not oauth_state or not code:
            raise InvalidState("the callback needs code and state")
        await oauth.callback(mcp_id, oauth_state, code)
        return OAuthDoneOut(ok=True, mcp_server_id=mcp_id)
