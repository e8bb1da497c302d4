from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import msgspec

from agentsvc_core.entities import McpAttachment, McpServer
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import McpRepository


def unique_slug(slug: str, taken: set[str]) -> str:
    candidate, n = slug, 1
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    return candidate


class MemoryMcps(McpRepository):
    def __init__(self) -> None:
        self._servers: dict[tuple[str, UUID], McpServer] = {}
        self._attachments: dict[tuple[str, str, UUID, UUID], McpAttachment] = {}

    def _slugs(self, org_id: str, but: UUID | None = None) -> set[str]:
        return {s.slug for (o, i), s in self._servers.items() if o == org_id and i != but}

    async def add(self, server: McpServer) -> McpServer:
        if server.managed_provider is not None and any(
            o == server.org_id and s.managed_provider == server.managed_provider
            for (o, _), s in self._servers.items()
        ):
            raise Conflict("the resource already exists")  # one per organization and provider
        stored = msgspec.structs.replace(
            server, slug=unique_slug(server.slug, self._slugs(server.org_id))
        )
        self._servers[(server.org_id, server.id)] = stored
        return stored

    def _get(self, org_id: str, mcp_id: UUID) -> McpServer:
        try:
            return self._servers[(org_id, mcp_id)]
        except KeyError:
            raise NotFound("MCP server not found") from None

    async def get(self, org_id: str, mcp_id: UUID) -> McpServer:
        return self._get(org_id, mcp_id)

    async def list_all(self, org_id: str) -> list[McpServer]:
        found = [s for (o, _), s in self._servers.items() if o == org_id]
        return sorted(found, key=lambda s: (s.created_at, s.id))

    async def modify(
        self, org_id: str, mcp_id: UUID, change: Callable[[McpServer], McpServer]
    ) -> McpServer:
        current = self._get(org_id, mcp_id)
        updated = change(current)
        if updated.slug != current.slug:
            slug = unique_slug(updated.slug, self._slugs(org_id, but=mcp_id))
            updated = msgspec.structs.replace(updated, slug=slug)
        self._servers[(org_id, mcp_id)] = updated
        return updated

    async def delete(self, org_id: str, mcp_id: UUID) -> None:
        self._get(org_id, mcp_id)
        del self._servers[(org_id, mcp_id)]
        for key in [k for k in self._attachments if k[0] == org_id and k[3] == mcp_id]:
            del self._attachments[key]

    async def attach(self, attachment: McpAttachment) -> McpAttachment:
        a = attachment
        self._get(a.org_id, a.mcp_id)
        key = (a.org_id, a.owner_kind, a.owner_id, a.mcp_id)
        existing = self._attachments.get(key)
        if existing is not None:
            # no services given: those chosen before stay
            services = existing.services if a.services is None else a.services
            a = msgspec.structs.replace(a, created_at=existing.created_at, services=services)
        self._attachments[key] = a
        return a

    async def detach(self, org_id: str, owner_kind: str, owner_id: UUID, mcp_id: UUID) -> bool:
        return self._attachments.pop((org_id, owner_kind, owner_id, mcp_id), None) is not None

    async def attachments(
        self, org_id: str, owner_kind: str, owner_id: UUID
    ) -> list[McpAttachment]:
        found = [
            a
            for (o, kind, owner, _), a in self._attachments.items()
            if o == org_id and kind == owner_kind and owner == owner_id
        ]
        return sorted(found, key=lambda a: (a.created_at, a.mcp_id))

    async def sealed_credentials(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        return [
            (s.org_id, s.id, s.credentials)
            for s in self._servers.values()
            if s.credentials is not None and (org_id is None or s.org_id == org_id)
        ]

    async def reseal(self, org_id: str, mcp_id: UUID, old: str, new: str) -> bool:
        server = self._servers.get((org_id, mcp_id))
        if server is None or server.credentials != old:
            return False
        self._servers[(org_id, mcp_id)] = msgspec.structs.replace(server, credentials=new)
        return True
