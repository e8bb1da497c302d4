"""Webhook tool definitions on PostgreSQL (table ``webhook_tools``; names unique
per organization by a constraint)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities import WebhookTool
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import WebhookToolStore

TAKEN = "TOOL_NAME_TAKEN"
_COLS = (
    "org_id, id, name, description, parameters, url, method, headers, timeout_ms,"
    " max_result_bytes, created_at, updated_at, approval"
)
_enc = msgspec.json.Encoder()
_params = msgspec.json.Decoder(dict[str, Any])


def _row(r: tuple[Any, ...]) -> WebhookTool:
    return WebhookTool(
        org_id=r[0],
        id=r[1],
        name=r[2],
        description=r[3],
        # json columns arrive parsed already (psycopg's json loader)
        parameters=r[4] if isinstance(r[4], dict) else _params.decode(r[4]),
        url=r[5],
        method=r[6],
        headers=r[7],
        timeout_ms=r[8],
        max_result_bytes=r[9],
        created_at=r[10],
        updated_at=r[11],
        approval=r[12],
    )


def _taken(tool: WebhookTool) -> Conflict:
    return Conflict(f"a tool named {tool.name!r} exists", code=TAKEN)


class PostgresWebhookTools(Repo, WebhookToolStore):
    async def add(self, tool: WebhookTool) -> None:
        try:
            async with translate(), self._pool.connection() as conn:
                await conn.execute(
                    f"INSERT INTO webhook_tools ({_COLS})"
                    " VALUES (%s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        tool.org_id,
                        tool.id,
                        tool.name,
                        tool.description,
                        _enc.encode(tool.parameters).decode(),
                        tool.url,
                        tool.method,
                        tool.headers,
                        tool.timeout_ms,
                        tool.max_result_bytes,
                        tool.created_at,
                        tool.updated_at,
                        tool.approval,
                    ),
                )
        except Conflict as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise _taken(tool) from None
            raise

    async def get(self, org_id: str, tool_id: UUID) -> WebhookTool:
        row = await self._one(
            f"SELECT {_COLS} FROM webhook_tools WHERE org_id = %s AND id = %s", (org_id, tool_id)
        )
        if row is None:
            raise NotFound("tool not found")
        return _row(row)

    async def by_name(self, org_id: str, name: str) -> WebhookTool | None:
        row = await self._one(
            f"SELECT {_COLS} FROM webhook_tools WHERE org_id = %s AND name = %s", (org_id, name)
        )
        return None if row is None else _row(row)

    async def by_ids(self, org_id: str, ids: Sequence[UUID]) -> list[WebhookTool]:
        rows = await self._all(
            f"SELECT {_COLS} FROM webhook_tools WHERE org_id = %s AND id = ANY(%s) ORDER BY name",
            (org_id, list(ids)),
        )
        return [_row(r) for r in rows]

    async def list_all(self, org_id: str) -> list[WebhookTool]:
        rows = await self._all(
            f"SELECT {_COLS} FROM webhook_tools WHERE org_id = %s ORDER BY name", (org_id,)
        )
        return [_row(r) for r in rows]

    async def replace(self, tool: WebhookTool, previous: WebhookTool) -> bool:
        try:
            async with translate(), self._pool.connection() as conn:
                cur = await conn.execute(
                    "UPDATE webhook_tools SET name = %s, description = %s, parameters = %s::json,"
                    " url = %s, method = %s, headers = %s, timeout_ms = %s,"
                    " max_result_bytes = %s, updated_at = %s, approval = %s"
                    " WHERE org_id = %s AND id = %s AND updated_at = %s"
                    " AND headers IS NOT DISTINCT FROM %s RETURNING id",
                    (
                        tool.name,
                        tool.description,
                        _enc.encode(tool.parameters).decode(),
                        tool.url,
                        tool.method,
                        tool.headers,
                        tool.timeout_ms,
                        tool.max_result_bytes,
                        tool.updated_at,
                        tool.approval,
                        tool.org_id,
                        tool.id,
                        previous.updated_at,
                        previous.headers,
                    ),
                )
                if await cur.fetchone() is not None:
                    return True
            await self.get(tool.org_id, tool.id)  # NotFound when it is gone
            return False
        except Conflict as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise _taken(tool) from None
            raise

    async def delete(self, org_id: str, tool_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM webhook_tools WHERE org_id = %s AND id = %s RETURNING id",
            (org_id, tool_id),
        )
        if row is None:
            raise NotFound("tool not found")

    async def sealed_headers(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        rows = await self._all(
            "SELECT org_id, id, headers FROM webhook_tools WHERE headers IS NOT NULL"
            " AND (%s::text IS NULL OR org_id = %s)",
            (org_id, org_id),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def reseal(self, org_id: str, tool_id: UUID, old: str, new: str) -> bool:
        row = await self._one(
            "UPDATE webhook_tools SET headers = %s WHERE org_id = %s AND id = %s AND headers = %s"
            " RETURNING id",
            (new, org_id, tool_id, old),
        )
        return row is not None
