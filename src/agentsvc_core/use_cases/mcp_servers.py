"""MCP servers of an organization: resources, sealed credentials, attachments,
and the server-side tools they give agents in the turn."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any, Literal
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import (
    Agent,
    CachedTool,
    McpAttachment,
    McpServer,
    McpTransport,
    Principal,
)
from agentsvc_core.errors import DomainError, InvalidInput, McpAuthRequired, Upstream
from agentsvc_core.ports import (
    TOOL_SEPARATOR,
    AgentRepository,
    Clock,
    McpClient,
    McpEndpoint,
    McpRepository,
    SecretBox,
    SecretUnreadable,
    ServerTools,
    ToolAuthRequired,
    ToolCallContext,
    ToolSetup,
    ToolSpec,
)
from agentsvc_core.ports.managed_oauth import ManagedTools
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.tools import Attached
from agentsvc_core.rules import MAX_NAME, MAX_TOOL_NAME, check_header, check_text, check_url_text
from agentsvc_core.use_cases.mcp_oauth import McpOAuth
from agentsvc_core.use_cases.sealed import reseal_rows

MAX_ARGS = 64
MAX_CREDENTIAL_ENTRIES = 64
_SLUG = re.compile(r"[^a-z0-9]+")
# What says where a server is: changing any of them makes it another server.
# (The transport cannot be changed: PATCH does not take it.)
_WHERE_IT_IS = ("url", "command", "args")


def slugify(name: str) -> str:
    """Lowercase, dashes for anything else, at most 48 characters."""
    slug = _SLUG.sub("-", name.lower()).strip("-")[:48].strip("-")
    return slug or "mcp"


class Credentials(msgspec.Struct, frozen=True, kw_only=True):
    headers: dict[str, str] = {}
    env: dict[str, str] = {}


_creds = msgspec.json.Decoder(Credentials)
_enc = msgspec.json.Encoder()


class McpDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    transport: McpTransport
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    credentials: Credentials | None = None
    allowed_tools: tuple[str, ...] | None = None


class McpChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    url: str | UnsetType | None = UNSET
    command: str | UnsetType | None = UNSET
    args: tuple[str, ...] | UnsetType = UNSET
    credentials: Credentials | UnsetType | None = UNSET
    allowed_tools: tuple[str, ...] | UnsetType | None = UNSET


class TestResult(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    tools: tuple[CachedTool, ...] = ()
    error: str | None = None


class AttachedServer(msgspec.Struct, frozen=True, kw_only=True):
    attachment: McpAttachment
    server: McpServer


def effective_tools(server: McpServer, attachment: McpAttachment) -> list[CachedTool]:
    """The server's tools, narrowed by its own and the attachment's allowedTools."""
    tools = list(server.tools_cache)
    for allowed in (server.allowed_tools, attachment.allowed_tools):
        if allowed is not None:
            tools = [t for t in tools if t.name in allowed]
    return tools


def _context(org_id: str, server_id: UUID) -> str:
    """The associated data of a server's sealed credentials: its organization and row."""
    return f"{org_id}:mcp_servers:{server_id}"


class McpServers:
    def __init__(
        self,
        repo: McpRepository,
        agents: AgentRepository,
        client: McpClient,
        box: SecretBox,
        urls: UrlPolicy,
        clock: Clock,
        *,
        allow_stdio: bool,
        oauth: McpOAuth | None = None,
        runners: RunnerStore | None = None,
        managed: ManagedTools | None = None,
    ) -> None:
        """``oauth``: None when OAuth is not available; ``runners``: None where no
        runner can own an attachment (an attachment to a runner needs the runner)."""
        self._repo = repo
        self._agents = agents
        self._client = client
        self._box = box
        self._urls = urls
        self._clock = clock
        self._allow_stdio = allow_stdio
        self.oauth = oauth
        self.runners = runners
        # the managed OAuth providers: which of a provider's tools an agent has on
        self.managed = managed

    def tools_of(self, item: AttachedServer) -> list[CachedTool]:
        """The tools ``item`` offers the model: ``effective_tools``, and for a managed
        provider's server only those of the services on (before the server could be
        listed, the catalogue's). A server registered by hand costs nothing more."""
        server, managed = item.server, self.managed
        if server.managed_provider is None or managed is None:
            return effective_tools(server, item.attachment)
        if not server.tools_cache:
            server = msgspec.structs.replace(server, tools_cache=managed.listed_tools(server))
        tools = effective_tools(server, item.attachment)
        on = managed.tools_on(server, item.attachment)
        return tools if on is None else [t for t in tools if t.name in on]

    # --- validation -------------------------------------------------------------

    def _check(self, s: McpServer) -> McpServer:
        check_text("name", s.name, max_len=MAX_NAME, required=True)
        if s.transport == "stdio":
            if not self._allow_stdio:
                raise InvalidInput(
                    "transport", "stdio MCP servers are disabled (AGENTSVC_ALLOW_STDIO_MCP)"
                )
            if not s.command:
                raise InvalidInput("command", "is required for the stdio transport")
            check_text("command", s.command, max_len=4096, required=True)
        else:
            if not s.url:
                raise InvalidInput("url", f"is required for the {s.transport} transport")
            check_text("url", s.url, max_len=4096, required=True)
            check_url_text("url", s.url)
            refusal = self._urls.refusal(s.url)
            if refusal:
                raise InvalidInput("url", refusal)
        if len(s.args) > MAX_ARGS:
            raise InvalidInput("args", f"at most {MAX_ARGS} arguments")
        for arg in s.args:
            check_text("args", arg, max_len=4096)
        for tool in s.allowed_tools or ():
            check_text("allowed_tools", tool, max_len=MAX_TOOL_NAME, required=True)
        return s

    def _seal(self, server_id: UUID, org_id: str, creds: Credentials | None) -> str | None:
        if creds is None or (not creds.headers and not creds.env):
            return None
        if len(creds.headers) + len(creds.env) > MAX_CREDENTIAL_ENTRIES:
            raise InvalidInput("credentials", f"at most {MAX_CREDENTIAL_ENTRIES} entries")
        for field, values in (
            ("credentials.headers", creds.headers),
            ("credentials.env", creds.env),
        ):
            for key, value in values.items():
                check_text(field, key, max_len=256, required=True)
                check_text(field, value, max_len=16_384)
        for name, value in creds.headers.items():
            check_header("credentials.headers", name, value)
        return self._box.seal(_enc.encode(creds), _context(org_id, server_id))

    def credentials_of(self, server: McpServer) -> Credentials:
        if server.credentials is None:
            return Credentials()
        return _creds.decode(self._box.open(server.credentials, _context(server.org_id, server.id)))

    def endpoint(self, server: McpServer, bearer: str | None = None) -> McpEndpoint:
        """How to reach ``server``; ``bearer``: an OAuth access token of the caller."""
        creds = self.credentials_of(server)
        headers = dict(creds.headers)
        key = f"{server.org_id}:{server.id}:{server.updated_at.isoformat()}"
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
            # a session per token: users never share an authorized session
            key += ":" + hashlib.sha256(bearer.encode()).hexdigest()[:16]
        return McpEndpoint(
            key=key,
            transport=server.transport,
            url=server.url,
            command=server.command,
            args=server.args,
            headers=headers,
            env=creds.env,
        )

    async def endpoint_for(self, who: Principal, server: McpServer) -> McpEndpoint:
        bearer = await self.oauth.bearer(who, server) if self.oauth is not None else None
        return self.endpoint(server, bearer)

    # --- resources --------------------------------------------------------------

    async def create(self, who: Principal, draft: McpDraft) -> McpServer:
        now = self._clock.now()
        server_id = uuid.uuid4()
        server = self._check(
            McpServer(
                id=server_id,
                org_id=who.org_id,
                name=draft.name,
                slug=slugify(draft.name),
                transport=draft.transport,
                url=draft.url if draft.transport != "stdio" else None,
                command=draft.command if draft.transport == "stdio" else None,
                args=draft.args,
                credentials=self._seal(server_id, who.org_id, draft.credentials),
                allowed_tools=draft.allowed_tools,
                status="active",
                tools_cache=(),
                created_at=now,
                updated_at=now,
            )
        )
        return await self._repo.add(server)

    async def get(self, who: Principal, mcp_id: UUID) -> McpServer:
        return await self._repo.get(who.org_id, mcp_id)

    async def list_all(self, who: Principal) -> list[McpServer]:
        return await self._repo.list_all(who.org_id)

    async def update(self, who: Principal, mcp_id: UUID, changes: McpChanges) -> McpServer:
        """Change a server. Moving it (another url, command or args) drops its
        stored credentials, unless the same request supplies new ones, and every
        user's OAuth tokens for it: secrets given for one address are never sent
        to another (``hasCredentials`` in the answer says which it was)."""
        now = self._clock.now()
        moved = False

        def apply(current: McpServer) -> McpServer:
            nonlocal moved
            fields: dict[str, Any] = {"updated_at": now}
            if changes.name is not UNSET:
                fields["name"] = changes.name
                fields["slug"] = slugify(changes.name)
            for name in ("url", "command", "args", "allowed_tools"):
                value = getattr(changes, name)
                if value is not UNSET:
                    fields[name] = value
            moved = any(
                name in fields and fields[name] != getattr(current, name) for name in _WHERE_IT_IS
            )
            if changes.credentials is not UNSET:
                fields["credentials"] = self._seal(current.id, current.org_id, changes.credentials)
            elif moved:
                fields["credentials"] = None
            if {"url", "command", "args", "credentials"} & set(fields):
                fields["tools_cache"] = ()  # another server now: list its tools again
            return self._check(msgspec.structs.replace(current, **fields))

        updated = await self._repo.modify(who.org_id, mcp_id, apply)
        if moved and self.oauth is not None:
            await self.oauth.forget(who.org_id, mcp_id)
        return updated

    async def delete(self, who: Principal, mcp_id: UUID) -> None:
        await self._repo.delete(who.org_id, mcp_id)
        if self.oauth is not None:
            await self.oauth.forget(who.org_id, mcp_id)

    async def test(self, who: Principal, mcp_id: UUID) -> TestResult:
        """Connect, list the tools, refresh the cache."""
        server = await self._repo.get(who.org_id, mcp_id)
        try:
            tools = await self._client.list_tools(await self.endpoint_for(who, server))
        except McpAuthRequired:
            return TestResult(
                ok=False,
                error="the server requires OAuth authorization: POST /api/mcps/{id}/oauth/start",
            )
        except (Upstream, SecretUnreadable) as exc:
            return TestResult(ok=False, error=exc.detail)
        cached = tuple(
            CachedTool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in tools
        )
        await self._repo.modify(
            who.org_id, mcp_id, lambda s: msgspec.structs.replace(s, tools_cache=cached)
        )
        return TestResult(ok=True, tools=cached)

    async def rotate_secrets(self, org_id: str | None = None) -> int:
        """Re-seal every stored credential with the newest key. Returns how many."""
        rows = await self._repo.sealed_credentials(org_id)
        return await reseal_rows(self._box, rows, _context, self._repo.reseal)

    # --- attachments ------------------------------------------------------------

    async def _owner(
        self, who: Principal, owner_kind: Literal["agent", "runner"], owner_id: UUID
    ) -> None:
        """``NotFound`` unless the organization has the agent or runner."""
        if owner_kind == "agent":
            await self._agents.get(who.org_id, owner_id)
        elif self.runners is not None:
            await self.runners.get(who.org_id, owner_id)

    async def attach(
        self,
        who: Principal,
        owner_kind: Literal["agent", "runner"],
        owner_id: UUID,
        mcp_id: UUID,
        allowed_tools: tuple[str, ...] | None,
        require_approval: tuple[str, ...] | None = None,
    ) -> AttachedServer:
        """Attach (or attach again, replacing its choices) an MCP server.
        ``require_approval``: the server's tools whose calls wait for a person's
        approval (names on the server, as ``allowed_tools``)."""
        await self._owner(who, owner_kind, owner_id)
        server = await self._repo.get(who.org_id, mcp_id)
        for tool in allowed_tools or ():
            check_text("allowed_tools", tool, max_len=MAX_TOOL_NAME, required=True)
        for tool in require_approval or ():
            check_text("require_approval", tool, max_len=MAX_TOOL_NAME, required=True)
        attachment = await self._repo.attach(
            McpAttachment(
                org_id=who.org_id,
                owner_kind=owner_kind,
                owner_id=owner_id,
                mcp_id=mcp_id,
                allowed_tools=allowed_tools,
                created_at=self._clock.now(),
                require_approval=require_approval or None,
            )
        )
        return AttachedServer(attachment=attachment, server=server)

    async def attached(
        self,
        who: Principal,
        owner_kind: Literal["agent", "runner"],
        owner_id: UUID,
        *,
        known_owner: bool = False,
    ) -> list[AttachedServer]:
        """``known_owner``: the caller has just read the agent (the turn): skip the check."""
        if not known_owner:
            await self._owner(who, owner_kind, owner_id)
        return [
            AttachedServer(attachment=a, server=await self._repo.get(who.org_id, a.mcp_id))
            for a in await self._repo.attachments(who.org_id, owner_kind, owner_id)
        ]

    async def detach(
        self, who: Principal, owner_kind: Literal["agent", "runner"], owner_id: UUID, mcp_id: UUID
    ) -> bool:
        await self._owner(who, owner_kind, owner_id)
        return await self._repo.detach(who.org_id, owner_kind, owner_id, mcp_id)


class McpTools(ServerTools):
    """The tools of an agent's attached MCP servers, offered as ``<slug>__<tool>``."""

    kinds: tuple[str, ...] = ()  # its attachments come with the turn (``ToolSetup.mcp``)

    def __init__(self, servers: McpServers, client: McpClient) -> None:
        self._servers = servers
        self._client = client

    def owns(self, name: str) -> bool:
        slug, sep, tool = name.partition(TOOL_SEPARATOR)
        return bool(sep and slug and tool) and "_" not in slug

    def is_extension(self, name: str) -> bool:
        return True

    async def _attached(
        self, who: Principal, agent: Agent, known: Attached | None
    ) -> list[AttachedServer]:
        attached = (
            [AttachedServer(attachment=a, server=s) for a, s in known]
            if known is not None
            else await self._servers.attached(who, "agent", agent.id, known_owner=True)
        )
        refreshed = []
        for item in attached:
            current = item
            if not item.server.tools_cache:
                # never listed yet: list now (once), so the model can see its tools
                result = await self._servers.test(who, item.server.id)
                if result.ok:
                    current = AttachedServer(
                        attachment=item.attachment,
                        server=msgspec.structs.replace(item.server, tools_cache=result.tools),
                    )
            refreshed.append(current)
        return refreshed

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        attached = await self._attached(who, agent, None if setup is None else setup.mcp)
        if who.visitor_id is not None:  # nor a managed provider's, which needs a user's
            attached = [item for item in attached if item.server.managed_provider is None]
        if who.visitor_id is not None and attached and self._servers.oauth is not None:
            # a published chat's visitor has no grant: a server that needs one is not offered
            ids = [item.server.id for item in attached]
            oauth = await self._servers.oauth.need_grants(who.org_id, ids)
            attached = [item for item in attached if item.server.id not in oauth]
        return [
            ToolSpec(
                name=f"{item.server.slug}{TOOL_SEPARATOR}{tool.name}",
                description=tool.description,
                parameters=tool.input_schema,
                approval=tool.name in (item.attachment.require_approval or ()),
            )
            for item in attached
            for tool in self._servers.tools_of(item)
        ]

    async def _authorize(self, who: Principal, server: McpServer) -> str:
        """The server asked for authorization: raise ``ToolAuthRequired`` with where
        to give it (a managed provider's flow, or the server's own OAuth), or answer
        the model why none can be given."""
        managed, oauth = self._servers.managed, self._servers.oauth
        try:
            if server.managed_provider is not None and managed is not None:
                url = await managed.challenge(who, server)
            elif oauth is not None:
                url = (await oauth.start(who, server)).redirect_url
            else:
                return f"error: the MCP server {server.name!r} requires authorization"
        except DomainError as exc:
            return f"error: authorization with {server.name!r} failed: {exc.detail}"
        raise ToolAuthRequired(
            server.name, url, f"Connect {server.name} so the agent can use its tools"
        )

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        slug, sep, tool = name.partition(TOOL_SEPARATOR)
        if not sep:
            return f"error: no tool named {name!r}"
        for item in await self._servers.attached(who, "agent", agent.id, known_owner=True):
            if item.server.slug != slug:
                continue
            if tool not in {t.name for t in self._servers.tools_of(item)}:
                return f"error: the tool {name!r} is not allowed for this agent"
            try:
                endpoint = await self._servers.endpoint_for(who, item.server)
                result = await self._client.call_tool(endpoint, tool, arguments)
            except McpAuthRequired:
                return await self._authorize(who, item.server)
            except Upstream as exc:
                if exc.code == "OAUTH_ERROR" and item.server.managed_provider is not None:
                    # the provider refused to refresh the grant (revoked there): connect again
                    return await self._authorize(who, item.server)
                return f"error: {exc.detail}"
            except SecretUnreadable as exc:
                return f"error: {exc.detail}"
            return f"error: {result.text}" if result.is_error else result.text
        return f"error: no MCP server {slug!r} is attached to this agent"
