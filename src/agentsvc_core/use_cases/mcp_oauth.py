"""OAuth 2.1 authorization of MCP servers, per user (or per organization for API keys).

start: discovery (RFC 9728 -> RFC 8414), a client registered dynamically (RFC
7591) once per server and issuer, PKCE S256, a state that is single-use, expires
after 10 minutes and is bound to organization, user and server, kept in storage
so any process can take the callback. callback: exchange the code, keep the
tokens sealed. bearer: the user's access token, refreshed shortly before it
expires, one refresh at a time per (user, server): a lock in the process and a
compare-and-set in storage across processes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from datetime import datetime, timedelta
from urllib.parse import urlencode
from uuid import UUID

import msgspec

from agentsvc_core.entities import McpServer, Principal
from agentsvc_core.errors import InvalidInput, InvalidState, PermissionDenied
from agentsvc_core.ports import Clock, SealedRecord, SecretBox, SecretStore
from agentsvc_core.ports.oauth import (
    AuthServer,
    ClientRegistration,
    OAuthNetwork,
    TokenSet,
)
from agentsvc_core.use_cases.sealed import SealedRecords

STATE_TTL = timedelta(minutes=10)
REFRESH_MARGIN = timedelta(seconds=60)


class StartResult(msgspec.Struct, frozen=True, kw_only=True):
    redirect_url: str
    state: str
    expires_at: datetime


class GrantStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the caller holds a grant for a server, and what the grant knows
    (never a token nor the client's secret)."""

    connected: bool
    expires_at: datetime | None = None
    scope: str | None = None


class _State(msgspec.Struct, frozen=True, kw_only=True):
    mcp_id: UUID
    mcp_url: str | None = None  # where the server was when the flow started
    user_key: str
    verifier: str
    redirect_uri: str
    server: AuthServer
    client: ClientRegistration


class _Grant(msgspec.Struct, frozen=True, kw_only=True):
    server: AuthServer
    client: ClientRegistration
    tokens: TokenSet
    # The MCP server's URL the tokens were granted for: they are never sent to
    # another (a server moved since is a new server; grants made before this field
    # existed have None, and are dropped by ``forget`` when the server moves).
    mcp_url: str | None = None


def user_key(who: Principal) -> str:
    """JWT users authorize for themselves; API keys for the organization."""
    return f"user:{who.user_id}" if who.user_id else "org"


def grant_key(server: McpServer, who_key: str) -> str:
    """Where a user's grant for ``server`` is kept: per (server, user), or for a
    managed provider's server per (provider, user), so that the grant outlives the
    server (``managed_oauth``)."""
    if server.managed_provider is not None:
        return managed_key(server.managed_provider, who_key)
    return f"{server.id}:{who_key}"


def managed_key(provider: str, who_key: str) -> str:
    return f"managed:{provider}:{who_key}"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class McpOAuth:
    def __init__(
        self,
        store: SecretStore,
        network: OAuthNetwork,
        box: SecretBox,
        clock: Clock,
        callback_base: str,
    ) -> None:
        self._records = SealedRecords(store, box)
        self._store = store  # take (single-use states) and swap (refresh) act on raw records
        self._net = network
        self._clock = clock
        self._callback_base = callback_base.rstrip("/")
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def redirect_uri(self, server: McpServer) -> str:
        return f"{self._callback_base}/api/mcps/{server.id}/oauth/callback"

    async def start(self, who: Principal, server: McpServer) -> StartResult:
        if who.visitor_id is not None:
            # a published chat's visitor grants nothing, for itself or the organization
            raise PermissionDenied("a visitor of a published chat cannot authorize MCP servers")
        if server.transport == "stdio" or not server.url:
            raise InvalidInput("transport", "OAuth applies to HTTP MCP servers only")
        auth = await self._net.discover(server.url)
        redirect = self.redirect_uri(server)
        client = await self._client(who.org_id, server, auth, redirect)
        verifier = _b64(secrets.token_bytes(48))
        challenge = _b64(hashlib.sha256(verifier.encode()).digest())
        # The organization travels in the state so the callback, which carries no
        # credential, finds the record; the random part makes it unguessable.
        state = f"{_b64(who.org_id.encode())}.{_b64(secrets.token_bytes(32))}"
        expires = self._clock.now() + STATE_TTL
        data = _State(
            mcp_id=server.id,
            mcp_url=server.url,
            user_key=user_key(who),
            verifier=verifier,
            redirect_uri=redirect,
            server=auth,
            client=client,
        )
        await self._records.put(who.org_id, "oauth_state", state, data, expires_at=expires)
        query = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": auth.resource,
        }
        if auth.scopes:
            query["scope"] = " ".join(auth.scopes)
        sep = "&" if "?" in auth.authorization_endpoint else "?"
        return StartResult(
            redirect_url=f"{auth.authorization_endpoint}{sep}{urlencode(query)}",
            state=state,
            expires_at=expires,
        )

    async def _client(
        self, org: str, server: McpServer, auth: AuthServer, redirect: str
    ) -> ClientRegistration:
        key = f"{server.id}:{auth.issuer}"
        known = await self._records.get(org, "oauth_client", key, ClientRegistration)
        if known is not None:
            return known
        if auth.registration_endpoint is None:
            raise InvalidInput(
                "url",
                "the server's authorization server offers no dynamic client registration",
            )
        client = await self._net.register(auth, redirect)
        await self._records.put(org, "oauth_client", key, client)
        return client

    async def callback(self, mcp_id: UUID, state: str, code: str) -> tuple[str, str]:
        """Exchange the code; returns (organization, user key) the tokens belong to."""
        org_part = state.split(".", 1)[0]
        try:
            org = base64.urlsafe_b64decode(org_part + "=" * (-len(org_part) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            raise InvalidState("unknown OAuth state") from None
        record = await self._store.take(org, "oauth_state", state)  # single use
        if record is None:
            raise InvalidState("unknown or already used OAuth state")
        if record.expires_at is not None and record.expires_at < self._clock.now():
            raise InvalidState("the OAuth state has expired; start again")
        data = self._records.open(org, "oauth_state", state, record.value, _State)
        if data.mcp_id != mcp_id:
            raise InvalidState("the OAuth state belongs to another server")
        tokens = await self._net.exchange(
            data.server,
            data.client,
            code=code,
            verifier=data.verifier,
            redirect_uri=data.redirect_uri,
        )
        key = f"{mcp_id}:{data.user_key}"
        grant = _Grant(server=data.server, client=data.client, tokens=tokens, mcp_url=data.mcp_url)
        await self._records.put(org, "oauth_token", key, grant)
        return org, data.user_key

    async def bearer(self, who: Principal, server: McpServer) -> str | None:
        """The caller's access token for ``server`` (refreshed if about to expire);
        a published chat's visitor has none."""
        if who.visitor_id is not None:
            return None
        key = grant_key(server, user_key(who))
        record = await self._store.get(who.org_id, "oauth_token", key)
        if record is None:
            return None
        grant = self._records.open(who.org_id, "oauth_token", key, record.value, _Grant)
        if grant.mcp_url is not None and grant.mcp_url != server.url:
            return None  # granted for where the server was before it moved
        if not self._stale(grant.tokens):
            return grant.tokens.access_token
        lock = self._locks.setdefault((who.org_id, key), asyncio.Lock())
        async with lock:
            record = await self._store.get(who.org_id, "oauth_token", key)
            if record is None:
                return None
            grant = self._records.open(who.org_id, "oauth_token", key, record.value, _Grant)
            if not self._stale(grant.tokens):
                return grant.tokens.access_token  # refreshed while we waited
            if grant.tokens.refresh_token is None:
                return None  # expired, nothing to refresh with: authorize again
            fresh = await self._net.refresh(grant.server, grant.client, grant.tokens.refresh_token)
            if fresh.refresh_token is None:  # the server may keep the old refresh token
                fresh = msgspec.structs.replace(fresh, refresh_token=grant.tokens.refresh_token)
            new = msgspec.structs.replace(grant, tokens=fresh)
            sealed = SealedRecord(value=self._records.seal(who.org_id, "oauth_token", key, new))
            if await self._store.swap(who.org_id, "oauth_token", key, record.value, sealed):
                return fresh.access_token
            # another process refreshed first: use what it stored
            latest = await self._records.get(who.org_id, "oauth_token", key, _Grant)
            return None if latest is None else latest.tokens.access_token

    async def status(self, who: Principal, server: McpServer) -> GrantStatus:
        """The caller's grant for ``server``: connected when one is kept for where
        the server is now and it is still usable (not expired, or refreshable)."""
        if who.visitor_id is not None:
            return GrantStatus(connected=False)
        key = grant_key(server, user_key(who))
        grant = await self._records.get(who.org_id, "oauth_token", key, _Grant)
        if grant is None or (grant.mcp_url is not None and grant.mcp_url != server.url):
            return GrantStatus(connected=False)
        tokens = grant.tokens
        expired = tokens.expires_at is not None and tokens.expires_at <= self._clock.now()
        if expired and tokens.refresh_token is None:
            return GrantStatus(connected=False)
        return GrantStatus(connected=True, expires_at=tokens.expires_at, scope=tokens.scope)

    async def disconnect(self, who: Principal, server: McpServer) -> bool:
        """Forget the caller's grant for ``server`` (no other user's); whether
        there was one."""
        if who.visitor_id is not None:
            raise PermissionDenied("a visitor of a published chat holds no grant")
        return await self.drop_grant(who.org_id, grant_key(server, user_key(who))) is not None

    async def keep_grant(
        self,
        org_id: str,
        key: str,
        server: AuthServer,
        client: ClientRegistration,
        tokens: TokenSet,
        mcp_url: str | None,
    ) -> None:
        """Keep (sealed) the tokens of a flow made elsewhere (``managed_oauth``),
        so ``bearer`` uses and refreshes them like its own."""
        grant = _Grant(server=server, client=client, tokens=tokens, mcp_url=mcp_url)
        await self._records.put(org_id, "oauth_token", key, grant)

    async def drop_grant(
        self, org_id: str, key: str
    ) -> tuple[AuthServer, ClientRegistration, TokenSet] | None:
        """Forget the grant kept under ``key``; what it was, or None."""
        record = await self._store.take(org_id, "oauth_token", key)
        if record is None:
            return None
        grant = self._records.open(org_id, "oauth_token", key, record.value, _Grant)
        return grant.server, grant.client, grant.tokens

    async def need_grants(self, org_id: str, mcp_ids: list[UUID]) -> set[UUID]:
        """Which of the servers authorize with OAuth: those a client was registered
        for (someone of the organization started to authorize them)."""
        found = await self._store.prefixed(org_id, "oauth_client", [f"{i}:" for i in mcp_ids])
        return {i for i in mcp_ids if f"{i}:" in found}

    async def forget(self, org_id: str, mcp_id: UUID) -> None:
        """Drop every user's tokens for the server and its client registrations
        (the server moved or was deleted: what it was authorized for is gone)."""
        for kind in ("oauth_token", "oauth_client"):
            await self._store.delete_prefix(org_id, kind, f"{mcp_id}:")

    def _stale(self, tokens: TokenSet) -> bool:
        """Within the refresh margin of expiry. The margin is at most half the
        token's lifetime, so a short-lived token is not refreshed again at once."""
        if tokens.expires_at is None:
            return False
        margin = REFRESH_MARGIN
        if tokens.issued_at is not None:
            margin = min(margin, (tokens.expires_at - tokens.issued_at) / 2)
        return tokens.expires_at - margin <= self._clock.now()
