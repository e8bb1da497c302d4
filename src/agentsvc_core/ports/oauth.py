"""OAuth 2.1 for MCP servers: what the core needs from the network. (Its state and
tokens are kept as sealed records: ``ports.sealed``.)"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import msgspec


class AuthServer(msgspec.Struct, frozen=True, kw_only=True):
    """What discovery found: the protected resource and its authorization server."""

    resource: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes: tuple[str, ...] = ()
    revocation_endpoint: str | None = None  # RFC 7009 (managed providers')


class ClientRegistration(msgspec.Struct, frozen=True, kw_only=True):
    client_id: str
    client_secret: str | None = None


class TokenSet(msgspec.Struct, frozen=True, kw_only=True):
    access_token: str
    token_type: str = "Bearer"  # noqa: S105 (a token type, not a secret)
    refresh_token: str | None = None
    expires_at: datetime | None = None
    issued_at: datetime | None = None
    scope: str | None = None


class OAuthNetwork(Protocol):
    """The HTTP side of OAuth. Raises ``Upstream`` (code ``OAUTH_ERROR``) with a
    readable detail (never a token) when a server fails or refuses; every URL
    learned from metadata passes the outbound URL guard."""

    async def discover(self, resource_url: str) -> AuthServer:
        """Protected-resource metadata (RFC 9728), then authorization-server
        metadata (RFC 8414). Refuses a server that does not advertise PKCE S256."""
        ...

    async def register(self, server: AuthServer, redirect_uri: str) -> ClientRegistration:
        """Dynamic client registration (RFC 7591)."""
        ...

    async def exchange(
        self,
        server: AuthServer,
        client: ClientRegistration,
        *,
        code: str,
        verifier: str,
        redirect_uri: str,
    ) -> TokenSet: ...

    async def refresh(
        self, server: AuthServer, client: ClientRegistration, refresh_token: str
    ) -> TokenSet: ...

    async def revoke(
        self, server: AuthServer, client: ClientRegistration, token: str, hint: str
    ) -> bool:
        """Token revocation (RFC 7009) at ``server.revocation_endpoint``; ``hint``:
        ``access_token`` or ``refresh_token``. True when the server answered 200;
        False when it refused or could not be reached (never raises)."""
        ...
