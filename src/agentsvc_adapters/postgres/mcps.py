"""MCP servers and attachments on PostgreSQL. Slugs are unique per organization
(a constraint); a colliding slug gets ``-2``, ``-3``... appended, retried until free."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres._rows import ATT_COLS, SERVER_COLS, to_attachment, to_server
from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities import McpAttachment, McpServer
from agentsvc_core.errors import NotFound, StorageError
from agentsvc_core.ports import McpRepository

_enc = msgspec.json.Encoder()
_MAX_SUFFIX = 1000


def _j(value: object) -> str | None:
    return None if value is None else _enc.encode(value).decode()


def _values(s: McpServer, slug: str) -> tuple[Any, ...]:
    return (
        s.name,
        slug,
        s.transport,
        s.url,
        s.command,
        _j(s.args),
        s.credentials,
        _j(s.allowed_tools),
        s.status,
        _j(s.tools_cache),
        s.created_at,
        s.updated_at,
    )


class PostgresMcps(Repo, McpRepository):
    async def add(self, server: McpServer) -> McpServer:
        async with translate(), self._pool.connection() as conn:
            for n in range(1, _MAX_SUFFIX):
                slug = server.slug if n == 1 else f"{server.slug}-{n}"
                cur = await conn.execute(
                    "INSERT INTO mcp_servers (org_id, id, name, slug, transport, url, command,"
                    " args, credentials, allowed_tools, status, tools_cache, created_at,"
                    " updated_at, managed_provider) VALUES (%s, %s, %s, %s, %s, %s, %s,"
                    " %s::json, %s, %s::json, %s, %s::json, %s, %s, %s)"
                    " ON CONFLICT (org_id, slug) DO NOTHING RETURNING id",
                    (server.org_id, server.id, *_values(server, slug), server.managed_provider),
                )
                if await cur.fetchone() is not None:
                    return msgspec.structs.replace(server, slug=slug)
        raise StorageError("no free slug for the MCP server")

    async def get(self, org_id: str, mcp_id: UUID) -> McpServer:
        row = await self._one(
            f"SELECT {SERVER_COLS} FROM mcp_servers WHERE org_id = %s AND id = %s", (org_id, mcp_id)
        )
        if row is None:
            raise NotFound("MCP server not found")
        return to_server(row)

    async def list_all(self, org_id: str) -> list[McpServer]:
        rows = await self._all(
            f"SELECT {SERVER_COLS} FROM mcp_servers WHERE org_id = %s ORDER BY created_at, id",
            (org_id,),
        )
        return [to_server(r) for r in rows]

    async def modify(
        self, org_id: str, mcp_id: UUID, change: Callable[[McpServer], McpServer]
    ) -> McpServer:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {SERVER_COLS} FROM mcp_servers WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, mcp_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("MCP server not found")
            current = to_server(row)
            updated = change(current)
            for n in range(1, _MAX_SUFFIX):
                slug = (
                    updated.slug
                    if n == 1 or updated.slug == current.slug
                    else f"{updated.slug}-{n}"
                )
                try:
                    async with conn.transaction():  # a savepoint: a slug clash is retried
                        await conn.execute(
                            "UPDATE mcp_servers SET name = %s, slug = %s, transport = %s, url = %s,"
                            " command = %s, args = %s::json, credentials = %s,"
                            " allowed_tools = %s::json, status = %s, tools_cache = %s::json,"
                            " created_at = %s, updated_at = %s WHERE org_id = %s AND id = %s",
                            (*_values(updated, slug), org_id, mcp_id),
                        )
                except psycopg.errors.UniqueViolation:
                    continue
                return msgspec.structs.replace(updated, slug=slug)
        raise StorageError("no free slug for the MCP server")

    async def delete(self, org_id: str, mcp_id: UUID) -> None:
        # attachments go with it (ON DELETE CASCADE)
        row = await self._one(
            "DELETE FROM mcp_servers WHERE org_id = %s AND id = %s RETURNING id", (org_id, mcp_id)
        )
        if row is None:
            raise NotFound("MCP server not found")

    async def attach(self, attachment: McpAttachment) -> McpAttachment:
        a = attachment
        await self.get(a.org_id, a.mcp_id)
        row = await self._one(
            f"INSERT INTO mcp_attachments ({ATT_COLS.replace('::text', '')})"
            " VALUES (%s, %s, %s, %s, %s::json, %s, %s::json, %s::json)"
            " ON CONFLICT (org_id, owner_kind, owner_id, mcp_id)"
            " DO UPDATE SET allowed_tools = EXCLUDED.allowed_tools,"
            " require_approval = EXCLUDED.require_approval,"
            # no services given: those chosen before stay
            " services = COALESCE(EXCLUDED.services, mcp_attachments.services)"
            f" RETURNING {ATT_COLS}",
            (
                a.org_id,
                a.owner_kind,
                a.owner_id,
                a.mcp_id,
                _j(a.allowed_tools),
                a.created_at,
                _j(a.services),
                _j(a.require_approval),
            ),
        )
        assert row is not None
        return to_attachment(row)

    async def detach(self, org_id: str, owner_kind: str, owner_id: UUID, mcp_id: UUID) -> bool:
        row = await self._one(
            "DELETE FROM mcp_attachments WHERE org_id = %s AND owner_kind = %s"
            " AND owner_id = %s AND mcp_id = %s RETURNING mcp_id",
            (org_id, owner_kind, owner_id, mcp_id),
        )
        return row is not None

    async def attachments(
        self, org_id: str, owner_kind: str, owner_id: UUID
    ) -> list[McpAttachment]:
        rows = await self._all(
            f"SELECT {ATT_COLS} FROM mcp_attachments WHERE org_id = %s AND owner_kind = %s"
            " AND owner_id = %s ORDER BY created_at, mcp_id",
            (org_id, owner_kind, owner_id),
        )
        return [to_attachment(r) for r in rows]

    async def sealed_credentials(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        rows = await self._all(
            "SELECT org_id, id, credentials FROM mcp_servers WHERE credentials IS NOT NULL"
            " AND (%(org)s::text IS NULL OR org_id = %(org)s) ORDER BY org_id, id",
            {"org": org_id},
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def reseal(self, org_id: str, mcp_id: UUID, old: str, new: str) -> bool:
        row = await self._one(
            "UPDATE mcp_servers SET credentials = %s WHERE org_id = %s AND id = %s"
            " AND credentials = %s RETURNING id",
            (new, org_id, mcp_id, old),
        )
        return row is not None
