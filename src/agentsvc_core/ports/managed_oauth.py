"""Managed OAuth MCP providers: the catalogue of known providers (GitHub, Linear,
Notion, Slack, Atlassian, Google...) this deployment can connect in one click,
with its OAuth client credentials and the services each provider's tools belong to."""

from __future__ import annotations

from typing import Protocol

import msgspec

from agentsvc_core.entities import CachedTool, McpAttachment, McpServer, Principal


class ManagedService(msgspec.Struct, frozen=True, kw_only=True):
    """A part of a provider a user turns on or off for an agent: the scopes it asks
    for and the MCP tools it owns (a static list of the provider's tool names)."""

    id: str
    name: str
    scopes: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()


class ManagedProvider(msgspec.Struct, frozen=True, kw_only=True):
    """A known provider, as configured in this deployment. ``missing`` names the
    environment variables still to set (an unavailable provider); ``client_secret``
    never leaves the process (no answer shows it)."""

    id: str
    name: str
    description: str = ""
    docs_url: str | None = None
    mcp_url: str | None
    transport: str = "streamable_http"
    authorization_endpoint: str
    token_endpoint: str
    revocation_endpoint: str | None = None
    scopes_separator: str = " "
    pkce: bool = True
    scopes: tuple[str, ...] = ()  # asked for whichever services are chosen
    authorize_params: dict[str, str] = {}
    services: tuple[ManagedService, ...] = ()
    client_id: str | None = None
    client_secret: str | None = None
    missing: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return not self.missing

    def service(self, service_id: str) -> ManagedService | None:
        return next((s for s in self.services if s.id == service_id), None)


class ManagedCatalogue(Protocol):
    def providers(self) -> list[ManagedProvider]:
        """Every known provider, in the catalogue's order."""
        ...

    def get(self, provider_id: str) -> ManagedProvider | None: ...


class ManagedTools(Protocol):
    """What the turn needs of the managed OAuth providers (``managed_oauth``) for a
    server that is a provider's: which tools its services let through, the tools
    to offer before it could be listed, and where to authorize."""

    def tools_on(self, server: McpServer, attachment: McpAttachment) -> frozenset[str] | None:
        """The tool names of the services on for ``attachment``; None: no filter."""
        ...

    def listed_tools(self, server: McpServer) -> tuple[CachedTool, ...]:
        """The catalogue's tools of the server's provider."""
        ...

    async def challenge(self, who: Principal, server: McpServer) -> str:
        """The URL that starts the managed flow for ``who`` (``auth_challenge``)."""
        ...
