"""Managed OAuth MCP providers: one click to GitHub, Linear, Notion, Google...

The deployment registers an OAuth app at each provider (its client credentials
come from the environment: ``ports.managed_oauth``). ``start`` builds the
provider's authorization URL (PKCE S256; a state bound to organization, user and
provider, single use, 10 minutes, kept sealed so any process takes the callback);
``callback`` exchanges the code, keeps the tokens sealed per (organization, user,
provider) where ``McpOAuth.bearer`` uses and refreshes them like its own, creates
or reuses the organization's MCP server for the provider (one per organization and
provider) and attaches it where asked, with the services chosen. ``disconnect``
revokes the grant at the provider where it has an RFC 7009 endpoint and forgets
it; the server stays, and a turn that needs it emits ``auth_challenge`` again.

A provider's services (Gmail, Calendar, Drive...) are turned on and off per agent;
the model is offered only the tools of the services on (``McpServers.tools_of``).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from datetime import datetime, timedelta
from urllib.parse import urlencode
from uuid import UUID

import msgspec

from agentsvc_core.entities import CachedTool, McpAttachment, McpServer, Principal
from agentsvc_core.errors import (
    Conflict,
    InvalidInput,
    InvalidState,
    NotFound,
    PermissionDenied,
)
from agentsvc_core.ports import AgentRepository, Clock, McpRepository, SecretBox, SecretStore
from agentsvc_core.ports.managed_oauth import ManagedCatalogue, ManagedProvider, ManagedService
from agentsvc_core.ports.oauth import AuthServer, ClientRegistration, OAuthNetwork
from agentsvc_core.use_cases.mcp_oauth import McpOAuth, managed_key, user_key
from agentsvc_core.use_cases.mcp_servers import slugify
from agentsvc_core.use_cases.sealed import SealedRecords

STATE_TTL = timedelta(minutes=10)
STATE_KIND = "managed_oauth_state"
CALLBACK_PATH = "/api/mcps/managed-oauth/callback"


class ManagedStart(msgspec.Struct, frozen=True, kw_only=True):
    authorization_url: str
    state: str
    expires_at: datetime


class Connected(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    mcp_server_id: UUID
    agent_id: UUID | None = None


class ServiceState(msgspec.Struct, frozen=True, kw_only=True):
    service: ManagedService
    enabled: bool


class _State(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    user_key: str
    verifier: str
    redirect_uri: str
    agent_id: UUID | None = None
    services: tuple[str, ...] | None = None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def auth_server(p: ManagedProvider) -> AuthServer:
    """The provider as the OAuth network port knows an authorization server."""
    return AuthServer(
        resource=p.mcp_url or "",
        issuer=p.id,
        authorization_endpoint=p.authorization_endpoint,
        token_endpoint=p.token_endpoint,
        revocation_endpoint=p.revocation_endpoint,
        scopes=p.scopes,
    )


def scopes_for(p: ManagedProvider, services: tuple[str, ...] | None) -> list[str]:
    """The provider's own scopes, then those of the chosen services (all when
    None), each once, in order."""
    chosen = [s for s in p.services if services is None or s.id in services]
    found: list[str] = []
    for scope in (*p.scopes, *(x for s in chosen for x in s.scopes)):
        if scope not in found:
            found.append(scope)
    return found


class ManagedOAuth:
    def __init__(
        self,
        catalogue: ManagedCatalogue,
        oauth: McpOAuth,
        repo: McpRepository,
        agents: AgentRepository,
        store: SecretStore,
        network: OAuthNetwork,
        box: SecretBox,
        clock: Clock,
        callback_base: str,
    ) -> None:
        self._catalogue = catalogue
        self._oauth = oauth
        self._repo = repo
        self._agents = agents
        self._records = SealedRecords(store, box)
        self._store = store
        self._net = network
        self._clock = clock
        self._redirect = callback_base.rstrip("/") + CALLBACK_PATH

    # --- the catalogue -------------------------------------------------------------

    def providers(self) -> list[ManagedProvider]:
        return self._catalogue.providers()

    def _provider(self, provider_id: str) -> ManagedProvider:
        found = self._catalogue.get(provider_id)
        if found is None:
            raise NotFound(f"no managed OAuth provider {provider_id!r}")
        return found

    def _usable(self, provider_id: str) -> ManagedProvider:
        p = self._provider(provider_id)
        if not p.available:
            raise InvalidInput(
                "provider", f"{p.name} is not configured here: set {', '.join(p.missing)}"
            )
        return p

    @staticmethod
    def _services(p: ManagedProvider, services: list[str] | None) -> tuple[str, ...] | None:
        if services is None:
            return None
        unknown = [s for s in services if p.service(s) is None]
        if unknown:
            known = ", ".join(s.id for s in p.services)
            raise InvalidInput("services", f"{p.name} has no service {unknown[0]!r} ({known})")
        return tuple(s.id for s in p.services if s.id in services)

    # --- the flow ------------------------------------------------------------------

    async def start(
        self,
        who: Principal,
        provider_id: str,
        agent_id: UUID | None = None,
        services: list[str] | None = None,
    ) -> ManagedStart:
        if who.visitor_id is not None:
            raise PermissionDenied("a visitor of a published chat cannot connect providers")
        if agent_id is not None:
            if not who.is_admin:
                raise PermissionDenied("attaching to an agent needs the organization's admin role")
            await self._agents.get(who.org_id, agent_id)  # NotFound
        p = self._usable(provider_id)
        chosen = self._services(p, services)
        verifier = _b64(secrets.token_bytes(48))
        # the organization travels in the state so the callback, which carries no
        # credential, finds the record; the random part makes it unguessable
        state = f"{_b64(who.org_id.encode())}.{_b64(secrets.token_bytes(32))}"
        expires = self._clock.now() + STATE_TTL
        data = _State(
            provider=p.id,
            user_key=user_key(who),
            verifier=verifier,
            redirect_uri=self._redirect,
            agent_id=agent_id,
            services=chosen,
        )
        await self._records.put(who.org_id, STATE_KIND, state, data, expires_at=expires)
        query = {
            **p.authorize_params,
            "response_type": "code",
            "client_id": str(p.client_id),
            "redirect_uri": self._redirect,
            "state": state,
        }
        scopes = scopes_for(p, chosen)
        if scopes:
            query["scope"] = p.scopes_separator.join(scopes)
        if p.pkce:
            query["code_challenge"] = _b64(hashlib.sha256(verifier.encode()).digest())
            query["code_challenge_method"] = "S256"
        sep = "&" if "?" in p.authorization_endpoint else "?"
        return ManagedStart(
            authorization_url=f"{p.authorization_endpoint}{sep}{urlencode(query)}",
            state=state,
            expires_at=expires,
        )

    async def _take_state(self, state: str) -> tuple[str, _State]:
        org_part = state.split(".", 1)[0]
        try:
            org = base64.urlsafe_b64decode(org_part + "=" * (-len(org_part) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            raise InvalidState("unknown OAuth state") from None
        record = await self._store.take(org, STATE_KIND, state)  # single use
        if record is None:
            raise InvalidState("unknown or already used OAuth state")
        if record.expires_at is not None and record.expires_at < self._clock.now():
            raise InvalidState("the OAuth state has expired; start again")
        return org, self._records.open(org, STATE_KIND, state, record.value, _State)

    async def callback(self, state: str, code: str) -> Connected:
        org, data = await self._take_state(state)
        p = self._catalogue.get(data.provider)
        if p is None or not p.available:
            raise InvalidState("the provider is no longer configured here")
        client = ClientRegistration(client_id=str(p.client_id), client_secret=p.client_secret)
        server_meta = auth_server(p)
        tokens = await self._net.exchange(
            server_meta,
            client,
            code=code,
            verifier=data.verifier,
            redirect_uri=data.redirect_uri,
        )
        key = managed_key(p.id, data.user_key)
        await self._oauth.keep_grant(org, key, server_meta, client, tokens, p.mcp_url)
        server = await self._server(org, p)
        if data.agent_id is not None:
            await self._repo.attach(
                McpAttachment(
                    org_id=org,
                    owner_kind="agent",
                    owner_id=data.agent_id,
                    mcp_id=server.id,
                    allowed_tools=None,
                    created_at=self._clock.now(),
                    services=data.services,
                )
            )
        return Connected(provider=p.id, mcp_server_id=server.id, agent_id=data.agent_id)

    async def server_of(self, org_id: str, provider_id: str) -> McpServer | None:
        found = [s for s in await self._repo.list_all(org_id) if s.managed_provider]
        return next((s for s in found if s.managed_provider == provider_id), None)

    async def _server(self, org_id: str, p: ManagedProvider) -> McpServer:
        """The organization's server for ``p``, created the first time."""
        found = await self.server_of(org_id, p.id)
        if found is not None:
            if found.url != p.mcp_url:  # the deployment moved the provider's server
                return await self._repo.modify(
                    org_id,
                    found.id,
                    lambda s: msgspec.structs.replace(s, url=p.mcp_url, tools_cache=()),
                )
            return found
        now = self._clock.now()
        server = McpServer(
            id=uuid.uuid4(),
            org_id=org_id,
            name=p.name,
            slug=slugify(p.id),
            transport="sse" if p.transport == "sse" else "streamable_http",
            url=p.mcp_url,
            command=None,
            args=(),
            credentials=None,
            allowed_tools=None,
            status="active",
            tools_cache=(),
            created_at=now,
            updated_at=now,
            managed_provider=p.id,
        )
        try:
            return await self._repo.add(server)
        except Conflict:  # another callback created it first
            again = await self.server_of(org_id, p.id)
            if again is None:
                raise
            return again

    async def disconnect(self, who: Principal, provider_id: str) -> bool:
        """Forget the caller's grant; True when the provider confirmed revoking it."""
        p = self._provider(provider_id)
        dropped = await self._oauth.drop_grant(who.org_id, managed_key(p.id, user_key(who)))
        if dropped is None:
            return False
        meta, client, tokens = dropped
        if p.revocation_endpoint is None:
            return False
        meta = msgspec.structs.replace(meta, revocation_endpoint=p.revocation_endpoint)
        revoked = False
        if tokens.refresh_token is not None:  # revoking it ends the grant (RFC 7009 2.1)
            revoked = await self._net.revoke(meta, client, tokens.refresh_token, "refresh_token")
        access = await self._net.revoke(meta, client, tokens.access_token, "access_token")
        return revoked or access

    # --- the services of an agent's server ----------------------------------------------

    async def _attached(
        self, who: Principal, agent_id: UUID, mcp_id: UUID
    ) -> tuple[ManagedProvider, McpAttachment]:
        await self._agents.get(who.org_id, agent_id)  # NotFound: not the organization's
        for attachment in await self._repo.attachments(who.org_id, "agent", agent_id):
            if attachment.mcp_id != mcp_id:
                continue
            provider = (await self._repo.get(who.org_id, mcp_id)).managed_provider
            p = None if provider is None else self._catalogue.get(provider)
            if p is None:
                break
            return p, attachment
        raise NotFound("no managed provider's MCP server is attached to this agent with that id")

    async def services(self, who: Principal, agent_id: UUID, mcp_id: UUID) -> list[ServiceState]:
        p, attachment = await self._attached(who, agent_id, mcp_id)
        on = attachment.services
        return [ServiceState(service=s, enabled=on is None or s.id in on) for s in p.services]

    async def set_services(
        self, who: Principal, agent_id: UUID, mcp_id: UUID, changes: dict[str, bool]
    ) -> list[ServiceState]:
        """Turn the services named in ``changes`` on (True) or off (False); the others
        stay as they were."""
        p, attachment = await self._attached(who, agent_id, mcp_id)
        self._services(p, list(changes))
        on = {
            s.id for s in p.services if attachment.services is None or s.id in attachment.services
        }
        on |= {s for s, enabled in changes.items() if enabled}
        on -= {s for s, enabled in changes.items() if not enabled}
        chosen = tuple(s.id for s in p.services if s.id in on)
        await self._repo.attach(msgspec.structs.replace(attachment, services=chosen))
        return [ServiceState(service=s, enabled=s.id in on) for s in p.services]

    # --- what the turn asks (``mcp_servers.ManagedTools``) ----------------------------

    def tools_on(self, server: McpServer, attachment: McpAttachment) -> frozenset[str] | None:
        p = self._catalogue.get(server.managed_provider or "")
        if p is None:
            return None
        on = attachment.services
        return frozenset(t for s in p.services if on is None or s.id in on for t in s.tools)

    def listed_tools(self, server: McpServer) -> tuple[CachedTool, ...]:
        p = self._catalogue.get(server.managed_provider or "")
        if p is None:
            return ()
        names = dict.fromkeys(t for s in p.services for t in s.tools)
        note = f"(a tool of {p.name}: connect {p.name} to use it)"
        return tuple(CachedTool(name=n, description=note) for n in names)

    async def challenge(self, who: Principal, server: McpServer) -> str:
        started = await self.start(who, server.managed_provider or "")
        return started.authorization_url
