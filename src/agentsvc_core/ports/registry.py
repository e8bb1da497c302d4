"""Search a registry of MCP servers (the official MCP registry or a compatible one)."""

from __future__ import annotations

from typing import Protocol

import msgspec


class RegistryRemote(msgspec.Struct, frozen=True, kw_only=True):
    transport: str
    url: str


class RegistryPackage(msgspec.Struct, frozen=True, kw_only=True):
    registry_type: str
    identifier: str
    version: str | None = None
    transport: str | None = None


class RegistryEntry(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str | None = None
    description: str = ""
    version: str | None = None
    repository_url: str | None = None
    website_url: str | None = None
    remotes: tuple[RegistryRemote, ...] = ()
    packages: tuple[RegistryPackage, ...] = ()


class McpRegistry(Protocol):
    async def search(self, query: str, limit: int) -> list[RegistryEntry]:
        """Servers matching ``query`` (latest versions). Raises ``Upstream``
        (code ``REGISTRY_UNAVAILABLE``) when the registry cannot answer."""
        ...
